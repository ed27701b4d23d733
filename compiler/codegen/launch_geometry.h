#pragma once
// Grid and block of one launch of a kernel instance, from the step's row count (what each
// template's doc block states under "Launch").
#include <array>
#include <cstdint>

#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

struct LaunchDims {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t smem_bytes = 0;  // dynamic shared memory (every template uses static shared memory)
};

// rows: tokens of the step for most families; rows for rms_norm / copy_rows / argmax / topk;
// queries for gqa_attention; ignored by kv_compact. batch: heads of a batched matmul (1 else).
LaunchDims launch_dims(const KernelSource& kernel, int64_t rows, int64_t batch = 1);

// A compile-time constant of the instance; throws kplan::Error when the family has no such one.
int64_t kernel_param(const KernelSource& kernel, const std::string& name);

}  // namespace kplan::codegen
