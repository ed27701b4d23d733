#pragma once
// Residual add: out[t, d] = a[t, d] + b[t, d] over contiguous [n_tokens, D] rows (out may alias
// a or b).
//
// Template parameters: D (row length), A_DT / B_DT / O_DT element types, THREADS.
// Launch: grid (n_tokens), block (THREADS).
// Arguments: a, b, out, n_tokens.
#include "common.cuh"

namespace kp {

template <int D, int A_DT, int B_DT, int O_DT, int THREADS>
__device__ void add(const void* a, const void* b, void* out, int n_tokens) {
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  for (int d = threadIdx.x; d < D; d += THREADS) {
    const i64 o = static_cast<i64>(t) * D + d;
    store<O_DT>(out, o, load<A_DT>(a, o) + load<B_DT>(b, o));
  }
}

}  // namespace kp
