#pragma once
// SwiGLU activation: out[t, i] = silu(gate[t, i]) * up[t, i] (dense MLPs and shared experts;
// gate and up may be the two halves of one fused gate_up output).
//
// Template parameters: I (width), G_DT / U_DT / O_DT element types of gate, up, out, THREADS.
// Launch: grid (n_tokens), block (THREADS).
// Arguments: gate, up, out (row t at t * <name>_row_stride), n_tokens, gate_row_stride,
// up_row_stride, out_row_stride.
#include "common.cuh"

namespace kp {

template <int I, int G_DT, int U_DT, int O_DT, int THREADS>
__device__ void swiglu(const void* gate, const void* up, void* out, int n_tokens,
                       int gate_row_stride, int up_row_stride, int out_row_stride) {
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  for (int i = threadIdx.x; i < I; i += THREADS) {
    const float g = load<G_DT>(gate, static_cast<i64>(t) * gate_row_stride + i);
    const float u = load<U_DT>(up, static_cast<i64>(t) * up_row_stride + i);
    store<O_DT>(out, static_cast<i64>(t) * out_row_stride + i, silu(g) * u);
  }
}

}  // namespace kp
