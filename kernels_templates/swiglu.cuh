#pragma once
// SwiGLU activation: out[t, i] = silu(gate[t, i]) * up[t, i] (dense MLPs and shared experts;
// gate and up may be the two halves of one fused gate_up output).
//
// Template parameters: I (width), G_DT / U_DT / O_DT element types of gate, up, out, THREADS.
// Launch: grid (ceil(I / (4 * THREADS)), n_tokens), block (THREADS): a row over several blocks
// of about 4 elements a thread (one block a row left a dense MLP's 18432 columns at 72 serial
// steps a thread: 41 us a 1-token step on the H200, bench/RESULTS.md 2026-12-04).
// Arguments: gate, up, out (row t at t * <name>_row_stride), n_tokens, gate_row_stride,
// up_row_stride, out_row_stride.
#include "common.cuh"

namespace kp {

template <int I, int G_DT, int U_DT, int O_DT, int THREADS>
__device__ void swiglu(const void* gate, const void* up, void* out, int n_tokens,
                       int gate_row_stride, int up_row_stride, int out_row_stride) {
  const int t = blockIdx.y;
  if (t >= n_tokens) return;
  // A thread's 4 elements (THREADS apart) loaded before any is stored (a store may alias the
  // inputs for the compiler: a load-store loop runs one round trip at a time).
  const int stride = THREADS * static_cast<int>(gridDim.x);
  for (int i0 = blockIdx.x * THREADS + threadIdx.x; i0 < I; i0 += 4 * stride) {
    float g[4], u[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + e * stride;
      g[e] = i < I ? load<G_DT>(gate, static_cast<i64>(t) * gate_row_stride + i) : 0.f;
      u[e] = i < I ? load<U_DT>(up, static_cast<i64>(t) * up_row_stride + i) : 0.f;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + e * stride;
      if (i < I) store<O_DT>(out, static_cast<i64>(t) * out_row_stride + i, silu(g[e]) * u[e]);
    }
  }
}

}  // namespace kp
