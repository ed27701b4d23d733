#pragma once
// Rotary position embedding (OPS rope) with optional YaRN scaling, on ROPE_DIM-wide slices of
// [n_tokens, HEADS, *] rows (e.g. the rope part of each query head, or the single rope key).
//
// Frequencies (HF transformers' rope init, computed here in f32): for pair i < ROPE_DIM / 2,
//   f = theta^(2i / ROPE_DIM); inv = 1 / f
//   YaRN (yarn_factor != 1): ramp = clamp((i - yarn_low) / (yarn_high - yarn_low), 0, 1),
//        inv = (1 / (yarn_factor * f)) * ramp + (1 / f) * (1 - ramp)
//   angle = position * inv; c = cos(angle) * cos_sin_scale; s = sin(angle) * cos_sin_scale
// (yarn_low / yarn_high: the correction range low / high of ir/OPS.md, high already nudged by
// 0.001 when equal to low; cos_sin_scale: the op's attention_factor, 1 without YaRN.)
//
// Template parameters:
//   ROPE_DIM  rotated width (even)
//   HEADS     slices per token
//   INTERLEAVED  1: pair i is (x[2i], x[2i+1]), written back to the same positions (DeepSeek /
//                   Kimi; the cache holds k_rope in this layout, as ir/OPS.md says)
//                0: rotate_half, pair i is (x[i], x[i + ROPE_DIM/2]) (Qwen3 / the DFlash drafter)
//   X_DT, Y_DT element types of x and y
//   THREADS   threads per block
// Launch: grid (n_tokens, ceil(HEADS / HPB)), block (THREADS), HPB = rope_heads_per_block: a
// token's heads dealt over blocks of about one pair a thread (one block a token left K2.6's 64
// heads at 8 pairs a thread, each a powf and two precise trig calls: 11 us a 1-token step). y
// may alias x in place (same strides): a block reads all of its heads' slices before writing any.
// Arguments:
//   x, y                     slice (t, h) starts at t * row_stride + h * head_stride
//   positions                int32 [n_tokens] position ids
//   n_tokens
//   x_row_stride, x_head_stride, y_row_stride, y_head_stride   in elements
//   theta, yarn_factor, yarn_low, yarn_high, cos_sin_scale      see above
#include "common.cuh"

namespace kp {

// Heads a block rotates: as many as give each thread a pair (at least one, at most HEADS).
template <int ROPE_DIM, int HEADS, int THREADS>
__host__ __device__ constexpr int rope_heads_per_block() {
  return THREADS / (ROPE_DIM / 2) < 1 ? 1 : THREADS / (ROPE_DIM / 2) > HEADS ? HEADS : THREADS / (ROPE_DIM / 2);
}

// cos and sin (times cos_sin_scale) of pair i's angle at `pos` (the doc block's frequencies).
template <int ROPE_DIM>
__device__ __forceinline__ void rope_cos_sin(int i, float pos, float theta, float yarn_factor, float yarn_low, float yarn_high,
                                             float cos_sin_scale, float& c, float& s) {
  const float f = powf(theta, static_cast<float>(2 * i) / static_cast<float>(ROPE_DIM));
  float inv = 1.f / f;
  if (yarn_factor != 1.f) {
    const float ramp = fminf(fmaxf((static_cast<float>(i) - yarn_low) / (yarn_high - yarn_low), 0.f), 1.f);
    inv = (1.f / (yarn_factor * f)) * ramp + inv * (1.f - ramp);
  }
  const float angle = pos * inv;
  c = cosf(angle) * cos_sin_scale;
  s = sinf(angle) * cos_sin_scale;
}

// The heads block `by` of token t rotates (rope_heads_per_block of them): the whole of kp::rope
// for one block, also run by fused kernels (mla_rope_append.cuh) from their own block index.
template <int ROPE_DIM, int HEADS, int INTERLEAVED, int X_DT, int Y_DT, int THREADS>
__device__ __forceinline__ void rope_heads(int t, int by, const void* x, void* y, const void* positions, int x_row_stride,
                                           int x_head_stride, int y_row_stride, int y_head_stride, float theta, float yarn_factor,
                                           float yarn_low, float yarn_high, float cos_sin_scale) {
  constexpr int HALF = ROPE_DIM / 2;
  constexpr int HPB = rope_heads_per_block<ROPE_DIM, HEADS, THREADS>();
  constexpr int PER_THREAD = (HPB * HALF + THREADS - 1) / THREADS;
  static_assert(ROPE_DIM % 2 == 0, "rope width must be even");
  const int h0 = by * HPB;
  const int PAIRS = min(HPB, HEADS - h0) * HALF;  // this block's
  const float pos = static_cast<float>(static_cast<const int*>(positions)[t]);
  float out_a[PER_THREAD], out_b[PER_THREAD];
#pragma unroll
  for (int p = 0; p < PER_THREAD; ++p) {
    const int pair = threadIdx.x + p * THREADS;
    if (pair >= PAIRS) continue;
    const int h = h0 + pair / HALF, i = pair % HALF;
    float c, s;
    rope_cos_sin<ROPE_DIM>(i, pos, theta, yarn_factor, yarn_low, yarn_high, cos_sin_scale, c, s);
    const i64 xo = static_cast<i64>(t) * x_row_stride + static_cast<i64>(h) * x_head_stride;
    const int ia = INTERLEAVED ? 2 * i : i, ib = INTERLEAVED ? 2 * i + 1 : i + HALF;
    const float a = load<X_DT>(x, xo + ia), b = load<X_DT>(x, xo + ib);
    out_a[p] = a * c - b * s;
    out_b[p] = b * c + a * s;
  }
  __syncthreads();  // every read of this block's slices happens before any write (y may alias x)
#pragma unroll
  for (int p = 0; p < PER_THREAD; ++p) {
    const int pair = threadIdx.x + p * THREADS;
    if (pair >= PAIRS) continue;
    const int h = h0 + pair / HALF, i = pair % HALF;
    const i64 yo = static_cast<i64>(t) * y_row_stride + static_cast<i64>(h) * y_head_stride;
    const int oa = INTERLEAVED ? 2 * i : i, ob = INTERLEAVED ? 2 * i + 1 : i + HALF;
    store<Y_DT>(y, yo + oa, out_a[p]);
    store<Y_DT>(y, yo + ob, out_b[p]);
  }
}

template <int ROPE_DIM, int HEADS, int INTERLEAVED, int X_DT, int Y_DT, int THREADS>
__device__ void rope(const void* x, void* y, const void* positions, int n_tokens, int x_row_stride,
                     int x_head_stride, int y_row_stride, int y_head_stride, float theta,
                     float yarn_factor, float yarn_low, float yarn_high, float cos_sin_scale) {
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  rope_heads<ROPE_DIM, HEADS, INTERLEAVED, X_DT, Y_DT, THREADS>(t, static_cast<int>(blockIdx.y), x, y, positions, x_row_stride,
                                                               x_head_stride, y_row_stride, y_head_stride, theta, yarn_factor,
                                                               yarn_low, yarn_high, cos_sin_scale);
}

}  // namespace kp
