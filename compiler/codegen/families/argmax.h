#pragma once
// Kernel family argmax: kernels_templates/sampling.cuh (kp::argmax).
// Greedy token selection: out_ids[r] = argmax of logits row r (ties: the smaller index).
//
// Template parameters (compile-time constants, template order):
//   V, X_DT (dtype), THREADS, CLUSTER (tuning: blocks per row, one thread-block cluster)
// See the template's doc block for their meaning and the launch geometry (families/argmax.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::argmax {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(logits);      // X_DT, row r at r * row_stride
  KPLAN_PTR(out_ids);     // int32 [n_rows]
  KPLAN_I32(n_rows);      // rows (= grid.y)
  KPLAN_I32(row_stride);  // elements
};

const Family& family();

}  // namespace kplan::codegen::argmax

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource argmax_kernel(int64_t vocab, ElemType logits, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
