#pragma once
// Matmul with compressed-tensors pack-quantized INT4 weights (group 32, symmetric), dequantised
// in registers (never expanded in memory), f32 accumulation:
//   y[t, n] = (ACC ? y[t, n] : 0) + sum_k x[t, k] * dequant(W)(n, k)
// See kp::dot_int4 (weight_dot.cuh) for the exact packing and dequantisation.
//
// Template parameters:
//   K, N      reduction and output dims (K % 32 == 0)
//   X_DT      element type of x;  Y_DT  element type of y
//   ACC       1: add into y; 0: overwrite
//   WARPS     warps per block (one warp per output n)
//   TOK_TILE  tokens per block
// Launch: grid (ceil(N / WARPS), ceil(n_tokens / TOK_TILE)), block (32 * WARPS).
// Arguments:
//   x             X_DT [n_tokens, K] with row stride x_row_stride
//   w_packed      int32 [N, K / 8]
//   w_scale       bf16 [N, K / 32]
//   y             Y_DT [n_tokens, N] with row stride y_row_stride
//   n_tokens, x_row_stride, y_row_stride
#include "weight_dot.cuh"

namespace kp {

template <int K, int N, int X_DT, int Y_DT, int ACC, int WARPS, int TOK_TILE>
__device__ void matmul_int4(const void* x, const void* w_packed, const void* w_scale, void* y,
                            int n_tokens, int x_row_stride, int y_row_stride) {
  const int t0 = blockIdx.y * TOK_TILE;
  const int nt = min(TOK_TILE, n_tokens - t0);
  const int n = blockIdx.x * WARPS + threadIdx.x / 32;
  if (nt <= 0 || n >= N) return;
  float acc[TOK_TILE];
#pragma unroll
  for (int r = 0; r < TOK_TILE; ++r) acc[r] = 0.f;
  dot_int4<K, X_DT, TOK_TILE>(static_cast<const int*>(w_packed) + static_cast<i64>(n) * (K / 8),
                              static_cast<const unsigned short*>(w_scale) + static_cast<i64>(n) * (K / 32),
                              offset<X_DT>(x, static_cast<i64>(t0) * x_row_stride), x_row_stride, nt, acc);
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < TOK_TILE; ++r) {
    const float s = warp_sum(acc[r]);
    if (r < nt && lane == r % 32) {
      const i64 o = static_cast<i64>(t0 + r) * y_row_stride + n;
      store<Y_DT>(y, o, ACC ? load<Y_DT>(y, o) + s : s);
    }
  }
}

}  // namespace kp
