#pragma once
// Kernel family embedding_norm: kernels_templates/embedding_norm.cuh (kp::embedding_rms_norm).
// The embedding gather and the first layer's input RMSNorm in one launch (one block per token).
//
// Template parameters (compile-time constants, template order):
//   H, OUT_DT (dtype), Y_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/embedding_norm.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::embedding_norm {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(ids);       // int32 [n_tokens]; clamped to [0, vocab) by the kernel
  KPLAN_PTR(table);     // bf16 [vocab, H]
  KPLAN_PTR(out);       // OUT_DT [n_tokens, H], contiguous: the gathered rows
  KPLAN_PTR(weight);    // bf16 [H], the norm's
  KPLAN_PTR(y);         // Y_DT [n_tokens, H], contiguous: the normalised rows
  KPLAN_I32(n_tokens);  // rows (= grid.x)
  KPLAN_I32(vocab);     // rows in table
  KPLAN_F32(eps);       // added to the mean square
};

const Family& family();

}  // namespace kplan::codegen::embedding_norm

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource embedding_norm_kernel(int64_t hidden, ElemType out, ElemType y, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
