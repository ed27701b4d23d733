#pragma once
// Kernel family mla_attention: kernels_templates/mla_attention.cuh (kp::mla_attention).
// MLA attention in absorbed form over the compressed cache, causal or tree-masked.
//
// Template parameters (compile-time constants, template order):
//   HEADS, C, R, Q_DT (dtype), KV_DT (dtype), O_DT (dtype), WARPS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/mla_attention.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::mla_attention {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(q_latent);             // Q_DT; (t, h) row at t * q_latent_row_stride + h * C
  KPLAN_PTR(q_rope);               // Q_DT; (t, h) row at t * q_rope_row_stride + h * q_rope_head_stride
  KPLAN_PTR(kv_cache);             // KV_DT [max_slots, C + R]
  KPLAN_PTR(cache_len);            // int32 [1]: committed rows before this step
  KPLAN_PTR(tree_mask);            // uint32 [n_tokens, mask_words], or null for causal
  KPLAN_PTR(out);                  // O_DT; (t, h) row at t * out_row_stride + h * C
  KPLAN_I32(n_tokens);             // queries in this step
  KPLAN_I32(q_latent_row_stride);  // elements
  KPLAN_I32(q_rope_row_stride);    // elements
  KPLAN_I32(q_rope_head_stride);   // elements
  KPLAN_I32(out_row_stride);       // elements
  KPLAN_I32(mask_words);           // ceil(n_tokens / 32)
  KPLAN_F32(softmax_scale);        // applied to the scores
};

const Family& family();

}  // namespace kplan::codegen::mla_attention

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource mla_attention_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv, ElemType out,
                                  std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
