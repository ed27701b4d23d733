#pragma once
// Kernel family gqa_attention: kernels_templates/gqa_attention.cuh (kp::gqa_attention).
// Grouped-query attention, non-causal and unmasked (the DFlash drafter), optionally over the last
// context_window context keys only (--draft-context-window).
//
// Template parameters (compile-time constants, template order):
//   HEADS, KV_HEADS, D, Q_DT (dtype), KV_DT (dtype), O_DT (dtype), WARPS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/gqa_attention.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::gqa_attention {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(q);               // (t, h) row at t * q_row_stride + h * D
  KPLAN_PTR(k);               // (j, g) row at j * k_row_stride + g * D
  KPLAN_PTR(v);               // (j, g) row at j * v_row_stride + g * D
  KPLAN_PTR(n_keys_base);     // int32 [1] or null
  KPLAN_PTR(out);             // (t, h) row at t * out_row_stride + h * D
  KPLAN_I32(n_queries);       // queries (= grid.y)
  KPLAN_I32(n_keys_extra);    // keys beyond *n_keys_base
  KPLAN_I32(q_row_stride);    // elements
  KPLAN_I32(k_row_stride);    // elements
  KPLAN_I32(v_row_stride);    // elements
  KPLAN_I32(out_row_stride);  // elements
  KPLAN_F32(scale);           // softmax scale
  KPLAN_I32(context_window);  // 0: every key; N > 0: the last N context keys + the n_queries own rows
};

const Family& family();

}  // namespace kplan::codegen::gqa_attention

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource gqa_attention_kernel(int64_t heads, int64_t kv_heads, int64_t head_dim, ElemType q, ElemType kv, ElemType out,
                                  std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
