#pragma once
// Kernel family topk: kernels_templates/sampling.cuh (kp::topk).
// The K largest logits of each row, descending, as log-probabilities (LOGPROB 1) or raw logits.
//
// Template parameters (compile-time constants, template order):
//   V, K, X_DT (dtype), LOGPROB, THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/topk.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::topk {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(logits);      // X_DT, row r at r * row_stride
  KPLAN_PTR(out_ids);     // int32 [n_rows, K]
  KPLAN_PTR(out_vals);    // f32 [n_rows, K]
  KPLAN_I32(n_rows);      // rows (= grid.x)
  KPLAN_I32(row_stride);  // elements
};

const Family& family();

}  // namespace kplan::codegen::topk

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource topk_kernel(int64_t vocab, int64_t k, ElemType logits, bool log_probs, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
