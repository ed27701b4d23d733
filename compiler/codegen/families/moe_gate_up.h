#pragma once
// Kernel family moe_gate_up: kernels_templates/moe_experts.cuh (kp::moe_gate_up).
// Routed experts, first half: h[t, k, :] = silu(x Wg[e]) * (x Wu[e]) for each chosen expert e (bf16 or INT4).
//
// Template parameters (compile-time constants, template order):
//   H, I, TOPK, W_FMT, X_DT (dtype), WARPS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/moe_gate_up.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::moe_gate_up {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);             // X_DT, row t at t * x_row_stride
  KPLAN_PTR(topk_ids);      // int32 [n_tokens, TOPK]
  KPLAN_PTR(w_gate);        // stacked [E, I, H] (bf16) or int32 [E, I, H/8] (INT4)
  KPLAN_PTR(w_gate_scale);  // bf16 [E, I, H/32] (INT4; unused for bf16)
  KPLAN_PTR(w_up);          // as w_gate
  KPLAN_PTR(w_up_scale);    // as w_gate_scale
  KPLAN_PTR(h);             // f32 [n_tokens, TOPK, I] scratch
  KPLAN_I32(n_tokens);      // tokens in this step
  KPLAN_I32(x_row_stride);  // elements
  KPLAN_I32(n_experts);     // E (ids are clamped to it)
};

const Family& family();

}  // namespace kplan::codegen::moe_gate_up

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource moe_gate_up_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType x,
                                std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
