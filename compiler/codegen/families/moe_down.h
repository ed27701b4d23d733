#pragma once
// Kernel family moe_down: kernels_templates/moe_experts.cuh (kp::moe_down).
// Routed experts, second half: out[t] (+)= sum_k w[t, k] * (h[t, k] Wd[e]) (bf16 or INT4).
//
// Template parameters (compile-time constants, template order):
//   H, I, TOPK, W_FMT, Y_DT (dtype), ACC, WARPS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/moe_down.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::moe_down {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(h);               // f32 [n_tokens, TOPK, I] (moe_gate_up's output)
  KPLAN_PTR(topk_ids);        // int32 [n_tokens, TOPK]
  KPLAN_PTR(topk_weights);    // f32 [n_tokens, TOPK]
  KPLAN_PTR(w_down);          // stacked [E, H, I] (bf16) or int32 [E, H, I/8] (INT4)
  KPLAN_PTR(w_down_scale);    // bf16 [E, H, I/32] (INT4; unused for bf16)
  KPLAN_PTR(out);             // Y_DT, row t at t * out_row_stride
  KPLAN_I32(n_tokens);        // tokens in this step
  KPLAN_I32(out_row_stride);  // elements
  KPLAN_I32(n_experts);       // E (ids are clamped to it)
};

const Family& family();

}  // namespace kplan::codegen::moe_down

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource moe_down_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType y, bool accumulate,
                             std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
