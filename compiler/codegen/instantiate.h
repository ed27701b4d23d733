#pragma once
// Instantiation: a family plus its compile-time constants -> a readable id and a tiny generated
// translation unit (#include the template header; one extern "C" __global__ entry, whose
// parameter list is the family's Args struct, calling the fully specialised template). Tuning
// constants not given are chosen by heuristics/<arch>.cc. Typed constructors per family
// (rms_norm_kernel(...), ...) live in families/<family>.h; this is the by-name door for tests
// and tools.
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"
#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

// Throws kplan::Error naming the family and parameter when a parameter is missing, unknown or
// out of range (e.g. an INT4 reduction dim that is not a multiple of 32).
KernelSource instantiate(std::string_view family, const ParamValues& params, std::string_view arch = kDefaultArch);

// "f32" / "bf16" for ElemType codes.
const char* elem_type_name(int64_t code);

}  // namespace kplan::codegen
