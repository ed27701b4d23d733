#pragma once
// Instantiation: a family plus its compile-time constants -> a readable id and a tiny generated
// translation unit (#include the template header; one extern "C" __global__ entry that calls the
// fully specialised template). Tuning constants not given are chosen by heuristics.cc.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

using ParamValues = std::map<std::string, int64_t>;

// Throws kplan::Error naming the family and parameter when a parameter is missing, unknown or
// out of range (e.g. an INT4 reduction dim that is not a multiple of 32).
KernelSource instantiate(std::string_view family, const ParamValues& params);

// "f32" / "bf16" for ElemType codes.
const char* elem_type_name(int64_t code);

}  // namespace kplan::codegen
