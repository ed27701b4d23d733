#pragma once
// RMSNorm over rows of length D: y = weight * (x / sqrt(mean(x^2) + eps)), in f32.
// Used for the layer norms, the MLA latent norms (q_a_layernorm, kv_a_layernorm on a strided
// slice of kv_a's output) and per-head norms (rows = tokens * heads).
//
// Template parameters:
//   D        row length
//   X_DT     element type of x (kp::F32 / kp::BF16)
//   Y_DT     element type of y
//   THREADS  threads per block (multiple of 32)
// Launch: grid (n_rows), block (THREADS).
// Arguments:
//   x         X_DT rows; row r starts at x + r * x_stride
//   weight    bf16 [D]
//   y         Y_DT rows; row r starts at y + r * y_stride (may alias x when types match)
//   n_rows    rows to normalise
//   x_stride  elements between rows of x
//   y_stride  elements between rows of y
//   eps       added to the mean square
#include "common.cuh"

namespace kp {

template <int D, int X_DT, int Y_DT, int THREADS>
__device__ void rms_norm(const void* x, const void* weight, void* y, int n_rows, int x_stride,
                         int y_stride, float eps) {
  constexpr int PER_THREAD = (D + THREADS - 1) / THREADS;
  const int r = blockIdx.x;
  if (r >= n_rows) return;
  const i64 xo = static_cast<i64>(r) * x_stride, yo = static_cast<i64>(r) * y_stride;
  // The weights are loaded with the row, before any store: a store may alias them for the
  // compiler, so loading each beside its store ran PER_THREAD round trips one after another.
  float v[PER_THREAD], g[PER_THREAD];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    v[i] = j < D ? load<X_DT>(x, xo + j) : 0.f;
    g[i] = j < D ? load<BF16>(weight, j) : 0.f;
    ss += v[i] * v[i];
  }
  ss = block_sum<THREADS>(ss);
  const float inv = 1.f / sqrtf(ss / static_cast<float>(D) + eps);
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    if (j < D) store<Y_DT>(y, yo + j, g[i] * (v[i] * inv));
  }
}

}  // namespace kp
