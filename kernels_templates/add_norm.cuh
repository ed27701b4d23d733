#pragma once
// A residual add and the RMSNorm of its sum in one launch (OPS add, rms_norm; compiler/passes/
// add_norm.h fuses them): out = a + b, y = rms_norm(out, weight), one block per token.
// The sum is computed in f32 and stored in O_DT, and the norm reads it as stored (rounded to O_DT
// first): bit for bit add.cuh's launch followed by rms_norm.cuh's. Why: the first layer's
// residual add (the gather's rows plus o_proj's, which no matmul epilogue can take: the gathered
// rows are bf16 where the residual stream is f32) is a launch of ~3 us inside a decode step's
// graph for 42 KiB of rows, and the post-attention norm reads its sum right after.
//
// Template parameters:
//   H        row length
//   A_DT, B_DT  element types of a and b;  O_DT  of out;  Y_DT  of y
//   THREADS  threads per block (multiple of 32)
// Launch: grid (n_tokens), block (THREADS).
// Arguments:
//   a, b      [n_tokens, H] contiguous rows
//   weight    bf16 [H], the norm's
//   out       O_DT [n_tokens, H] contiguous: the sums (the residual stream)
//   y         Y_DT [n_tokens, H] contiguous: the normalised sums
//   n_tokens  rows;  eps  added to the mean square
#include "rms_norm.cuh"

namespace kp {

template <int H, int A_DT, int B_DT, int O_DT, int Y_DT, int THREADS>
__device__ void add_rms_norm(const void* a, const void* b, const void* weight, void* out, void* y, int n_tokens, float eps) {
  constexpr int PER_THREAD = (H + THREADS - 1) / THREADS;
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  const i64 o = static_cast<i64>(t) * H;
  // Every load before any store (out and y may alias a or b for the compiler).
  float v[PER_THREAD], g[PER_THREAD];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    const float s = j < H ? load<A_DT>(a, o + j) + load<B_DT>(b, o + j) : 0.f;
    v[i] = O_DT == BF16 ? bf16_to_f32(f32_to_bf16(s)) : s;  // the sum as out stores it
    g[i] = j < H ? load<BF16>(weight, j) : 0.f;
    ss += v[i] * v[i];
  }
  store_row_and_norm<H, O_DT, Y_DT, THREADS>(ss, v, g, out, y, o, eps);
}

}  // namespace kp
