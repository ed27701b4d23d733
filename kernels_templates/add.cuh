#pragma once
// Residual add: out[t, d] = a[t, d] + b[t, d] over contiguous [n_tokens, D] rows (out may alias
// a or b).
//
// Template parameters: D (row length), A_DT / B_DT / O_DT element types, THREADS.
// Launch: grid (n_tokens), block (THREADS).
// Arguments: a, b, out, n_tokens.
#include "common.cuh"

namespace kp {

// A chunk's loads all before its stores: out may alias a or b for the compiler, so a load
// beside its store ran D / THREADS L2 round trips one after another (K2.6's 7168-wide add of the
// dense layer took 10 us on an H200, bench/RESULTS.md 2026-12-06 session 41). Chunks of at most
// 16 columns a thread bound the registers for wide rows.
template <int D, int A_DT, int B_DT, int O_DT, int THREADS>
__device__ void add(const void* a, const void* b, void* out, int n_tokens) {
  constexpr int PER_THREAD = (D + THREADS - 1) / THREADS, CHUNK = PER_THREAD < 16 ? PER_THREAD : 16;
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  const i64 row = static_cast<i64>(t) * D;
#pragma unroll 1
  for (int c = 0; c < PER_THREAD; c += CHUNK) {
    float v[CHUNK];
#pragma unroll
    for (int i = 0; i < CHUNK; ++i) {
      const int d = threadIdx.x + (c + i) * THREADS;
      v[i] = d < D ? load<A_DT>(a, row + d) + load<B_DT>(b, row + d) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < CHUNK; ++i) {
      const int d = threadIdx.x + (c + i) * THREADS;
      if (d < D) store<O_DT>(out, row + d, v[i]);
    }
  }
}

}  // namespace kp
