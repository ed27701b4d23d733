#pragma once
// The last step of the attention kernels: each warp of a block walked its own subset of the keys
// with an online softmax, leaving a running max m, a running sum l and an unnormalised
// accumulator over N output columns; this merges the WARPS partials into one normalised row.
//
// Template parameters: N (output columns), WARPS (warps per block), O_DT output element type.
// Every thread of the block (32 * WARPS) must call it. acc holds columns lane + 32 * i.
// Writes out[out_offset + c] for c < N; a row no key reached (every l = 0) is written as zeros.
#include "common.cuh"

namespace kp {

template <int N, int WARPS, int O_DT>
__device__ void merge_warp_partials(float m, float l, const float (&acc)[(N + 31) / 32], void* out,
                                    i64 out_offset) {
  __shared__ float warp_m[WARPS], warp_l[WARPS];
  __shared__ float warp_acc[WARPS][N];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < (N + 31) / 32; ++i) {
    const int c = lane + 32 * i;
    if (c < N) warp_acc[warp][c] = acc[i];
  }
  __syncthreads();
  float m_all = neg_inf();
#pragma unroll
  for (int w = 0; w < WARPS; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float l_all = 0.f, weight[WARPS];
#pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    weight[w] = warp_l[w] > 0.f ? expf(warp_m[w] - m_all) : 0.f;
    l_all += warp_l[w] * weight[w];
  }
  const float inv_l = l_all > 0.f ? 1.f / l_all : 0.f;
  for (int c = threadIdx.x; c < N; c += 32 * WARPS) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) v += warp_acc[w][c] * weight[w];
    store<O_DT>(out, out_offset + c, v * inv_l);
  }
}

}  // namespace kp
