#pragma once
// Grouped-query attention, non-causal and unmasked (OPS gqa_attention; the DFlash drafter's
// block attending over its context keys and the block's own keys):
//   out[t, h, :] = sum_j softmax_j(scale * q[t, h, :] . k[j, g, :]) * v[j, g, :],  g = h / (HEADS / KV_HEADS)
// over keys j < n_keys, n_keys = (n_keys_base ? *n_keys_base : 0) + n_keys_extra (the context
// length lives in a device buffer so graphs replay as it grows). With context_window N > 0 (the
// drafter context window, OPS gqa_attention {context_window}) the last n_queries keys are the
// queries' own rows and only keys j >= max(0, n_keys - n_queries - N) are read: the last N context
// rows and the own rows. Online softmax in f32, one block per (head, query), warps interleaved
// over keys.
//
// Template parameters:
//   HEADS, KV_HEADS  query and key/value heads (HEADS % KV_HEADS == 0)
//   D                head dim
//   Q_DT, KV_DT, O_DT element types of q, of k and v, of out
//   WARPS            warps per block
// Launch: grid (HEADS, n_queries), block (32 * WARPS).
// Arguments:
//   q            (t, h) row at t * q_row_stride + h * D
//   k, v         (j, g) row at j * k_row_stride + g * D (v: v_row_stride)
//   n_keys_base  int32 [1] or null
//   out          (t, h) row at t * out_row_stride + h * D
//   n_queries, n_keys_extra, q_row_stride, k_row_stride, v_row_stride, out_row_stride, scale
//   context_window  0: every key; N > 0: the last N context keys and the own rows
#include "common.cuh"
#include "warp_partials.cuh"

namespace kp {

template <int HEADS, int KV_HEADS, int D, int Q_DT, int KV_DT, int O_DT, int WARPS>
__device__ void gqa_attention(const void* q, const void* k, const void* v, const void* n_keys_base,
                              void* out, int n_queries, int n_keys_extra, int q_row_stride,
                              int k_row_stride, int v_row_stride, int out_row_stride, float scale,
                              int context_window) {
  static_assert(HEADS % KV_HEADS == 0, "query heads must be a multiple of kv heads");
  constexpr int DPL = (D + 31) / 32;
  const int h = blockIdx.x, t = blockIdx.y;
  if (t >= n_queries) return;
  const int g = h / (HEADS / KV_HEADS);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_keys = (n_keys_base ? static_cast<const int*>(n_keys_base)[0] : 0) + n_keys_extra;
  const int first_key = context_window > 0 ? max(0, n_keys - n_queries - context_window) : 0;

  float qv[DPL];
  const i64 qo = static_cast<i64>(t) * q_row_stride + static_cast<i64>(h) * D;
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < D ? load<Q_DT>(q, qo + d) : 0.f;
  }
  float m = neg_inf(), l = 0.f, acc[DPL];
#pragma unroll
  for (int i = 0; i < DPL; ++i) acc[i] = 0.f;
  for (int j = first_key + warp; j < n_keys; j += WARPS) {
    const i64 ko = static_cast<i64>(j) * k_row_stride + static_cast<i64>(g) * D;
    const i64 vo = static_cast<i64>(j) * v_row_stride + static_cast<i64>(g) * D;
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < D) dot += qv[i] * load<KV_DT>(k, ko + d);
    }
    const float score = warp_sum(dot) * scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < D ? p * load<KV_DT>(v, vo + d) : 0.f);
    }
    m = m_new;
  }
  merge_warp_partials<D, WARPS, O_DT>(m, l, acc, out, static_cast<i64>(t) * out_row_stride + static_cast<i64>(h) * D);
}

}  // namespace kp
