#pragma once
// Grid and block of one launch of a kernel instance: the instance's family computes them
// (families/<family>.cc, what each template's doc block states under "Launch").
#include <cstdint>

#include "compiler/codegen/families/family.h"
#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

// rows / batch: see LaunchShape. Throws kplan::Error for a negative row count or a zero batch.
LaunchDims launch_dims(const KernelSource& kernel, int64_t rows, int64_t batch = 1);

}  // namespace kplan::codegen
