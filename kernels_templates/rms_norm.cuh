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

// This thread's columns j = threadIdx.x + i * THREADS of a row at xo and of the weights, loaded
// together before any store (a store may alias them for the compiler: loading each beside its
// store ran PER_THREAD round trips one after another); returns the thread's sum of squares.
template <int D, int X_DT, int THREADS, int PER_THREAD = (D + THREADS - 1) / THREADS>
__device__ __forceinline__ float rms_norm_load(const void* x, i64 xo, const void* weight, float (&v)[PER_THREAD], float (&g)[PER_THREAD]) {
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    v[i] = j < D ? load<X_DT>(x, xo + j) : 0.f;
    g[i] = j < D ? load<BF16>(weight, j) : 0.f;
    ss += v[i] * v[i];
  }
  return ss;
}

// 1 / sqrt(mean square + eps) of a row of D values from each thread's sum of squares ss: the
// block's sum (block_sum's order), the same rounding for every launch that normalises a row.
template <int D, int THREADS>
__device__ __forceinline__ float row_rms_inverse(float ss, float eps) {
  return 1.f / sqrtf(block_sum<THREADS>(ss) / static_cast<float>(D) + eps);
}

// A fused launch's tail (embedding_norm.cuh, add_norm.cuh): the block's row, held by its threads as
// rms_norm_load leaves it (v, g, the thread's sum of squares ss), stored as out[o + j] = v and
// normalised into y[o + j] = g * (v * inv), each rounded once to its element type.
template <int D, int OUT_DT, int Y_DT, int THREADS, int PER_THREAD>
__device__ __forceinline__ void store_row_and_norm(float ss, const float (&v)[PER_THREAD], const float (&g)[PER_THREAD], void* out, void* y,
                                                   i64 o, float eps) {
  const float inv = row_rms_inverse<D, THREADS>(ss, eps);
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    if (j < D) {
      store<OUT_DT>(out, o + j, v[i]);
      store<Y_DT>(y, o + j, g[i] * (v[i] * inv));
    }
  }
}

// Row xo of x normalised into y at yo, each value rounded once to Y_DT: the block's THREADS
// threads' loads, sum of squares and rounding. One definition for the norm launch (rms_norm) and a
// matmul that normalises its rows itself (matmul.cuh NORM 3): with the same THREADS the two are
// bit for bit the same rows.
template <int D, int X_DT, int Y_DT, int THREADS>
__device__ __forceinline__ void rms_norm_row(const void* x, i64 xo, const void* weight, void* y, i64 yo, float eps) {
  constexpr int PER_THREAD = (D + THREADS - 1) / THREADS;
  float v[PER_THREAD], g[PER_THREAD];
  const float inv = row_rms_inverse<D, THREADS>(rms_norm_load<D, X_DT, THREADS>(x, xo, weight, v, g), eps);
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    if (j < D) store<Y_DT>(y, yo + j, g[i] * (v[i] * inv));
  }
}

template <int D, int X_DT, int Y_DT, int THREADS>
__device__ void rms_norm(const void* x, const void* weight, void* y, int n_rows, int x_stride,
                         int y_stride, float eps) {
  const int r = blockIdx.x;
  if (r >= n_rows) return;
  rms_norm_row<D, X_DT, Y_DT, THREADS>(x, static_cast<i64>(r) * x_stride, weight, y, static_cast<i64>(r) * y_stride, eps);
}

}  // namespace kp
