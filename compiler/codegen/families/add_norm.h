#pragma once
// Kernel family add_norm: kernels_templates/add_norm.cuh (kp::add_rms_norm).
// A residual add and the RMSNorm of its sum in one launch (one block per token).
//
// Template parameters (compile-time constants, template order):
//   H, A_DT (dtype), B_DT (dtype), O_DT (dtype), Y_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/add_norm.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::add_norm {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(a);         // A_DT [n_tokens, H], contiguous
  KPLAN_PTR(b);         // B_DT [n_tokens, H], contiguous
  KPLAN_PTR(weight);    // bf16 [H], the norm's
  KPLAN_PTR(out);       // O_DT [n_tokens, H], contiguous: a + b
  KPLAN_PTR(y);         // Y_DT [n_tokens, H], contiguous: the normalised sums
  KPLAN_I32(n_tokens);  // rows (= grid.x)
  KPLAN_F32(eps);       // added to the mean square
};

const Family& family();

}  // namespace kplan::codegen::add_norm

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource add_norm_kernel(int64_t hidden, ElemType a, ElemType b, ElemType out, ElemType y, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
