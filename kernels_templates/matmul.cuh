#pragma once
// Dense matmul with bf16 weights, f32 accumulation, for the small token counts of decode and
// tree verify (and prefill chunks, by tiling tokens):
//   y[b, t, n] = (ACC ? y[b, t, n] : 0) + sum_k x[b, t, k] * W[b](n, k)
// W_LAYOUT 0: W[b] is bf16 [N, K] row-major (nn.Linear's weight); one warp per output n.
// W_LAYOUT 1: W[b] is bf16 [K, N] row-major (e.g. absorbed MLA W_UK per head); one thread per n.
// Batches (heads of OPS head_matmul) sit w_batch_stride elements apart in W; with W_LAYOUT 1 a
// transposed weight view (the absorbed W_UK) needs no copy.
//
// Template parameters:
//   K, N      reduction and output dims
//   X_DT      element type of x (kp::F32 / kp::BF16)
//   Y_DT      element type of y
//   W_LAYOUT  0 = [N, K], 1 = [K, N]
//   ACC       1: add into y (fused residual add); 0: overwrite y
//   WARPS     warps per block
//   TOK_TILE  tokens handled per block (each weight load is reused TOK_TILE times)
// Launch (compiler/codegen/families/matmul.cc):
//   W_LAYOUT 0: grid (ceil(N / WARPS), ceil(n_tokens / TOK_TILE), batch), block (32 * WARPS)
//   W_LAYOUT 1: grid (ceil(N / (32 * WARPS)), ceil(n_tokens / TOK_TILE), batch), block (32 * WARPS)
// Arguments:
//   x               X_DT; element (b, t, k) at b * x_batch_stride + t * x_row_stride + k
//   w               bf16, batch b at b * w_batch_stride
//   y               Y_DT; element (b, t, n) at b * y_batch_stride + t * y_row_stride + n
//   n_tokens        tokens (rows of x) in this step
//   x_row_stride, x_batch_stride, y_row_stride, y_batch_stride, w_batch_stride   in elements
#include "weight_dot.cuh"

namespace kp {

template <int K, int N, int X_DT, int Y_DT, int W_LAYOUT, int ACC, int WARPS, int TOK_TILE>
__device__ void matmul(const void* x, const void* w, void* y, int n_tokens, int x_row_stride,
                       int x_batch_stride, int y_row_stride, int y_batch_stride, int w_batch_stride) {
  const int b = blockIdx.z;
  const int t0 = blockIdx.y * TOK_TILE;
  const int nt = min(TOK_TILE, n_tokens - t0);
  if (nt <= 0) return;
  const void* xb = offset<X_DT>(x, static_cast<i64>(b) * x_batch_stride + static_cast<i64>(t0) * x_row_stride);
  const i64 yb = static_cast<i64>(b) * y_batch_stride + static_cast<i64>(t0) * y_row_stride;
  const unsigned short* wb = static_cast<const unsigned short*>(w) + static_cast<i64>(b) * w_batch_stride;
  float acc[TOK_TILE];
#pragma unroll
  for (int r = 0; r < TOK_TILE; ++r) acc[r] = 0.f;

  if constexpr (W_LAYOUT == 0) {
    const int n = blockIdx.x * WARPS + threadIdx.x / 32;
    if (n >= N) return;
    dot_bf16<K, X_DT, TOK_TILE>(wb + static_cast<i64>(n) * K, xb, x_row_stride, nt, acc);
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < TOK_TILE; ++r) {
      const float s = warp_sum(acc[r]);
      if (r < nt && lane == r % 32) {
        const i64 o = yb + static_cast<i64>(r) * y_row_stride + n;
        store<Y_DT>(y, o, ACC ? load<Y_DT>(y, o) + s : s);
      }
    }
  } else {
    const int n = blockIdx.x * (32 * WARPS) + threadIdx.x;
    if (n >= N) return;
    for (int k = 0; k < K; ++k) {
      const float wv = bf16_to_f32(wb[static_cast<i64>(k) * N + n]);
#pragma unroll
      for (int r = 0; r < TOK_TILE; ++r) {
        if (r < nt) acc[r] += wv * load<X_DT>(xb, static_cast<i64>(r) * x_row_stride + k);
      }
    }
#pragma unroll
    for (int r = 0; r < TOK_TILE; ++r) {
      if (r < nt) {
        const i64 o = yb + static_cast<i64>(r) * y_row_stride + n;
        store<Y_DT>(y, o, ACC ? load<Y_DT>(y, o) + acc[r] : acc[r]);
      }
    }
  }
}

}  // namespace kp
