#pragma once
// Multi-head Latent Attention in the ABSORBED form (as FlashMLA and the real decoders run it):
// the cache holds, per position, the normed compressed latent c [kv_lora] and the rotated rope
// key k_rope [rope], shared by all heads. kv_b_proj's key half W_UK is folded into the query
// (q_latent = W_UK^T q_nope) and its value half W_UV is applied after attention
// (v = W_UV o_latent). score(t, s) = (q_latent . c_s + q_rope . k_rope_s) * scale.
#include <cstdint>
#include <span>

#include "runtime/step_model.h"

namespace kplan::cpu {

struct MlaDims {
  int64_t heads = 0;
  int64_t kv_lora = 0;  // latent width C
  int64_t nope = 0;     // qk_nope_head_dim
  int64_t rope = 0;     // qk_rope_head_dim
  int64_t v = 0;        // v_head_dim
};

// q_nope [T, H*nope] -> q_latent [T, H*C] with kv_b [H*(nope+v), C]: per head h,
// q_latent[h][c] = sum_n q_nope[h][n] * kv_b[h*(nope+v) + n][c].
Matrix mla_absorb_query(const Matrix& q_nope, const Matrix& kv_b, const MlaDims& d);

// o_latent [T, H*C] -> attention output [T, H*v]: v[h][j] = sum_c kv_b[h*(nope+v)+nope+j][c] *
// o_latent[h][c].
Matrix mla_expand_value(const Matrix& o_latent, const Matrix& kv_b, const MlaDims& d);

// q_latent [T, H*C], q_rope [T, H*R] (rotated). latent [>= committed+T, C] and k_rope
// [>= committed+T, R]: rows [0, committed) are the committed cache, which every step token
// attends; rows [committed, committed+T) are this step's tokens, attended per `mask`
// (StepInput::tree_mask; empty = causal). Returns o_latent [T, H*C].
Matrix mla_attention_absorbed(const Matrix& q_latent, const Matrix& q_rope, const Matrix& latent,
                              const Matrix& k_rope, int64_t committed,
                              std::span<const uint32_t> mask, const MlaDims& d, float scale);

}  // namespace kplan::cpu
