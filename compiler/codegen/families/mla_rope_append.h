#pragma once
// Kernel family mla_rope_append: kernels_templates/mla_rope_append.cuh (kp::mla_rope_append).
// An MLA layer's kv_a_layernorm, key rope, cache append and query rope in one launch
// (compiler/passes/rope_append.h).
//
// Template parameters (compile-time constants, template order):
//   C, R, HEADS, INTERLEAVED, X_DT (dtype), Q_DT (dtype), KV_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/mla_rope_append.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::mla_rope_append {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(latent);             // X_DT, token t's C values at t * latent_stride (before the norm)
  KPLAN_PTR(norm_weight);        // bf16 [C]
  KPLAN_PTR(k_rope_src);         // X_DT, token t's R values at t * k_rope_stride (before the rope)
  KPLAN_PTR(cache);              // KV_DT [max_slots, C + R], written in place
  KPLAN_PTR(cache_len);          // int32 [1]: L
  KPLAN_PTR(q_src);              // X_DT, head h of token t at t * q_src_row_stride + h * q_src_head_stride
  KPLAN_PTR(q_dst);              // Q_DT, in its own strides (may alias q_src)
  KPLAN_PTR(positions);          // int32 [n_tokens]
  KPLAN_I32(n_tokens);           // tokens (= grid.x)
  KPLAN_I32(latent_stride);      // elements
  KPLAN_I32(k_rope_stride);      // elements
  KPLAN_I32(max_slots);          // rows of the cache (clamp)
  KPLAN_I32(q_src_row_stride);   // elements
  KPLAN_I32(q_src_head_stride);  // elements
  KPLAN_I32(q_dst_row_stride);   // elements
  KPLAN_I32(q_dst_head_stride);  // elements
  KPLAN_F32(eps);                // the norm's
  KPLAN_F32(theta);              // RoPE base (rope.cuh's frequencies)
  KPLAN_F32(yarn_factor);        // 1: plain RoPE
  KPLAN_F32(yarn_low);
  KPLAN_F32(yarn_high);
  KPLAN_F32(cos_sin_scale);
};

const Family& family();

}  // namespace kplan::codegen::mla_rope_append

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc); heads 0: no
// query rope.
KernelSource mla_rope_append_kernel(int64_t kv_lora, int64_t rope, int64_t heads, bool interleaved, ElemType x, ElemType q,
                                    ElemType kv, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
