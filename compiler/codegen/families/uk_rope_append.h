#pragma once
// Kernel family uk_rope_append: kernels_templates/uk_rope_append.cuh (kp::uk_rope_append).
// An MLA layer's W_UK product (a head_matmul over [K, N] weights, matmul.cuh's W_LAYOUT 1) and its
// rope-append (mla_rope_append.cuh) in one launch (compiler/passes/uk_rope_append.h).
//
// Template parameters (compile-time constants, template order), all given by the caller:
//   K, N, X_DT (dtype), Y_DT (dtype), WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, PREFETCH   W_UK's instance's
//   C, R, HEADS, INTERLEAVED, Q_DT (dtype), KV_DT (dtype)                            the rope-append's
// See the template's doc block for their meaning and the launch geometry (families/uk_rope_append.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::uk_rope_append {

// Launch arguments, in the kernel's parameter order: W_UK's (matmul::Args') then the
// rope-append's (mla_rope_append::Args').
struct Args {
  KPLAN_PTR(x);                  // X_DT; q_nope (b, t, k) at b * x_batch_stride + t * x_row_stride + k
  KPLAN_PTR(w);                  // bf16 W_UK, head b's [K, N] at b * w_batch_stride
  KPLAN_PTR(y);                  // Y_DT; q_latent (b, t, n) at b * y_batch_stride + t * y_row_stride + n
  KPLAN_I32(n_tokens);           // tokens of the step
  KPLAN_I32(x_row_stride);       // elements
  KPLAN_I32(x_batch_stride);     // elements
  KPLAN_I32(y_row_stride);       // elements
  KPLAN_I32(y_batch_stride);     // elements
  KPLAN_I32(w_batch_stride);     // elements
  KPLAN_PTR(latent);             // X_DT, token t's C values at t * latent_stride (before the norm)
  KPLAN_PTR(norm_weight);        // bf16 [C]
  KPLAN_PTR(k_rope_src);         // X_DT, token t's R values at t * k_rope_stride (before the rope)
  KPLAN_PTR(cache);              // KV_DT [max_slots, C + R], written in place
  KPLAN_PTR(cache_len);          // int32 [1]: L
  KPLAN_PTR(q_src);              // X_DT, head h of token t at t * q_src_row_stride + h * q_src_head_stride
  KPLAN_PTR(q_dst);              // Q_DT, in its own strides (may alias q_src)
  KPLAN_PTR(positions);          // int32 [n_tokens]
  KPLAN_I32(latent_stride);      // elements
  KPLAN_I32(k_rope_stride);      // elements
  KPLAN_I32(max_slots);          // rows of the cache (clamp)
  KPLAN_I32(q_src_row_stride);   // elements
  KPLAN_I32(q_src_head_stride);  // elements
  KPLAN_I32(q_dst_row_stride);   // elements
  KPLAN_I32(q_dst_head_stride);  // elements
  KPLAN_F32(eps);                // the latent norm's
  KPLAN_F32(theta);              // RoPE base (rope.cuh's frequencies)
  KPLAN_F32(yarn_factor);        // 1: plain RoPE
  KPLAN_F32(yarn_low);
  KPLAN_F32(yarn_high);
  KPLAN_F32(cos_sin_scale);
};

const Family& family();

}  // namespace kplan::codegen::uk_rope_append

namespace kplan::codegen {

// The fused instance of `uk` (a matmul instance: W_LAYOUT 1, MMA 0, no epilogue, norm or
// routed rows) with the rope-append of heads query heads over a C + R cache row.
KernelSource uk_rope_append_kernel(const KernelSource& uk, int64_t kv_lora, int64_t rope, int64_t heads, bool interleaved, ElemType q,
                                   ElemType kv, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
