#pragma once
// MLA attention in absorbed form over the compressed cache (OPS mla_attention; DeepSeek-V3):
//   score(t, h, s) = (q_latent[t, h, :] . kv[s, 0:C] + q_rope[t, h, :] . kv[s, C:C+R]) * softmax_scale
//   out[t, h, :]   = sum_s softmax_s(score) * kv[s, 0:C]
// over the keys token t may see: every committed row s < L (L = *cache_len, the cache length
// before this step), plus this step's rows L + j (kv_append put token j there) for which
//   tree_mask == nullptr: j <= t (causal: prefill, AR decode)
//   otherwise:            bit j % 32 of tree_mask[t * mask_words + j / 32] (ancestor-or-self
//                         mask of a DDTree verify step)
// q_latent is q_nope already multiplied by W_UK (the absorption); out stays in latent space
// (a head_matmul with W_UV follows). Online softmax in f32: one block per (head, token), each
// warp walks every WARPS-th key, and the warps' partial results are merged at the end.
//
// Template parameters:
//   HEADS   attention heads
//   C       kv_lora_rank (latent width)
//   R       qk_rope_head_dim
//   Q_DT    element type of q_latent and q_rope;  KV_DT  of the cache;  O_DT  of out
//   WARPS   warps per block
// Launch: grid (HEADS, n_tokens), block (32 * WARPS).
// Arguments:
//   q_latent      Q_DT; (t, h) row at t * q_latent_row_stride + h * C
//   q_rope        Q_DT; (t, h) row at t * q_rope_row_stride + h * q_rope_head_stride
//   kv_cache      KV_DT [max_slots, C + R] (see kv_cache.cuh)
//   cache_len     int32 [1]: L
//   tree_mask     uint32 [n_tokens, mask_words], or null for causal
//   out           O_DT; (t, h) row at t * out_row_stride + h * C
//   n_tokens, q_latent_row_stride, q_rope_row_stride, q_rope_head_stride, out_row_stride,
//   mask_words, softmax_scale
#include "common.cuh"
#include "warp_partials.cuh"

namespace kp {

template <int HEADS, int C, int R, int Q_DT, int KV_DT, int O_DT, int WARPS>
__device__ void mla_attention(const void* q_latent, const void* q_rope, const void* kv_cache,
                              const void* cache_len, const void* tree_mask,
                              void* out, int n_tokens, int q_latent_row_stride, int q_rope_row_stride,
                              int q_rope_head_stride, int out_row_stride, int mask_words,
                              float softmax_scale) {
  constexpr int CPL = (C + 31) / 32;  // latent elements per lane
  constexpr int RPL = (R + 31) / 32;  // rope elements per lane
  const int h = blockIdx.x, t = blockIdx.y;
  if (t >= n_tokens) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int past = max(static_cast<const int*>(cache_len)[0], 0);
  const unsigned* mask = static_cast<const unsigned*>(tree_mask);

  float ql[CPL], qr[RPL];
  const i64 qlo = static_cast<i64>(t) * q_latent_row_stride + static_cast<i64>(h) * C;
  const i64 qro = static_cast<i64>(t) * q_rope_row_stride + static_cast<i64>(h) * q_rope_head_stride;
#pragma unroll
  for (int i = 0; i < CPL; ++i) {
    const int c = lane + 32 * i;
    ql[i] = c < C ? load<Q_DT>(q_latent, qlo + c) : 0.f;
  }
#pragma unroll
  for (int i = 0; i < RPL; ++i) {
    const int r = lane + 32 * i;
    qr[i] = r < R ? load<Q_DT>(q_rope, qro + r) : 0.f;
  }

  float m = neg_inf(), l = 0.f, acc[CPL];
#pragma unroll
  for (int i = 0; i < CPL; ++i) acc[i] = 0.f;
  const int n_keys = past + n_tokens;
  for (int s = warp; s < n_keys; s += WARPS) {
    if (s >= past) {
      const int j = s - past;
      const bool visible = mask == nullptr ? j <= t
                                           : ((mask[static_cast<i64>(t) * mask_words + j / 32] >> (j % 32)) & 1u) != 0;
      if (!visible) continue;
    }
    float kv[CPL];
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < CPL; ++i) {
      const int c = lane + 32 * i;
      kv[i] = c < C ? load<KV_DT>(kv_cache, static_cast<i64>(s) * (C + R) + c) : 0.f;
      dot += ql[i] * kv[i];
    }
#pragma unroll
    for (int i = 0; i < RPL; ++i) {
      const int r = lane + 32 * i;
      if (r < R) dot += qr[i] * load<KV_DT>(kv_cache, static_cast<i64>(s) * (C + R) + C + r);
    }
    const float score = warp_sum(dot) * softmax_scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < CPL; ++i) acc[i] = acc[i] * correction + p * kv[i];
    m = m_new;
  }

  merge_warp_partials<C, WARPS, O_DT>(m, l, acc, out, static_cast<i64>(t) * out_row_stride + static_cast<i64>(h) * C);
}

}  // namespace kp
