#pragma once
// Token selection on lm_head logits (lm_head itself is a kp::matmul with f32 output).
//
// argmax: out_ids[r] = the index of the largest logit of row r (ties: the smaller index).
// topk:   the K largest logits of row r in descending order (ties: the smaller index first);
//         out_vals holds them as log-probabilities (LOGPROB = 1: logit - logsumexp(row)) or as
//         raw logits (LOGPROB = 0). DDTree's drafter proposals use the log-probabilities.
//
// Template parameters: V (vocab), K (topk only), X_DT logits element type, LOGPROB, THREADS.
// Launch: grid (n_rows), block (THREADS).
// Arguments:
//   argmax: logits (row r at r * row_stride), out_ids (int32 [n_rows]), n_rows, row_stride
//   topk:   logits, out_ids (int32 [n_rows, K]), out_vals (f32 [n_rows, K]), n_rows, row_stride
#include "common.cuh"

namespace kp {

template <int V, int X_DT, int THREADS>
__device__ void argmax(const void* logits, void* out_ids, int n_rows, int row_stride) {
  const int r = blockIdx.x;
  if (r >= n_rows) return;
  const i64 base = static_cast<i64>(r) * row_stride;
  float best = neg_inf();
  int index = 1 << 30;
  for (int j = threadIdx.x; j < V; j += THREADS) {
    const float v = load<X_DT>(logits, base + j);
    if (v > best || index == (1 << 30)) {
      best = v;
      index = j;
    }
  }
  block_argmax<THREADS>(best, index);
  if (threadIdx.x == 0) static_cast<int*>(out_ids)[r] = index;
}

template <int V, int K, int X_DT, int LOGPROB, int THREADS>
__device__ void topk(const void* logits, void* out_ids, void* out_vals, int n_rows, int row_stride) {
  const int r = blockIdx.x;
  if (r >= n_rows) return;
  const i64 base = static_cast<i64>(r) * row_stride;
  float lse = 0.f;
  if constexpr (LOGPROB) {
    float m = neg_inf();
    for (int j = threadIdx.x; j < V; j += THREADS) m = fmaxf(m, load<X_DT>(logits, base + j));
    m = block_max<THREADS>(m);
    float s = 0.f;
    for (int j = threadIdx.x; j < V; j += THREADS) s += expf(load<X_DT>(logits, base + j) - m);
    lse = m + logf(block_sum<THREADS>(s));
  }
  // Round k takes the best element strictly after round k-1's (prev_v, prev_i) in the order
  // (value descending, index ascending), so no chosen list is needed.
  float prev_v = __int_as_float(0x7f800000);  // +inf
  int prev_i = -1;
  for (int k = 0; k < K; ++k) {
    float best = neg_inf();
    int index = 1 << 30;
    for (int j = threadIdx.x; j < V; j += THREADS) {
      const float v = load<X_DT>(logits, base + j);
      const bool after_prev = v < prev_v || (v == prev_v && j > prev_i);
      if (after_prev && (v > best || (v == best && j < index) || index == (1 << 30))) {
        best = v;
        index = j;
      }
    }
    block_argmax<THREADS>(best, index);
    if (threadIdx.x == 0) {
      static_cast<int*>(out_ids)[static_cast<i64>(r) * K + k] = index;
      static_cast<float*>(out_vals)[static_cast<i64>(r) * K + k] = best - lse;
    }
    prev_v = best;
    prev_i = index;
  }
}

}  // namespace kp
