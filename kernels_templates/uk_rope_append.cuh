#pragma once
// An MLA layer's W_UK product and its rope-append in one launch (compiler/passes/uk_rope_append.h
// fuses them): the grid's first HEADS z-slices are the head_matmul's (matmul.cuh, W_LAYOUT 1:
// q_latent[t, h, :] = q_nope[t, h, :] W_UK[h] with W_UK[h] read as [K, N]; CUDA cores), the
// blocks after them are mla_rope_append.cuh's (the latent's norm, the key's rope and the cache
// row of each token, the queries' rope). The two read nothing the other writes: the attention
// after them reads both. Why: a 1-token decode step runs the rope-append as a launch of ~2 us
// inside its graph (mostly the launch's own ramp and tail), ahead of W_UK's; inside W_UK's grid
// its blocks run beside W_UK's on the SMs W_UK leaves idle (64 heads x 2 column blocks on 132).
//
// Template parameters:
//   K, N, X_DT, Y_DT, WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, PREFETCH   the W_UK instance's (matmul.cuh)
//   C, R, HEADS, INTERLEAVED, Q_DT, KV_DT                               the rope-append's; X_DT is also
//       its sources' element type (q_nope and q_pe are one q_b result) and HEADS W_UK's batch
// Launch: grid (W_UK's token tiles, its column blocks, HEADS + the rope-append blocks laid over
// the same x and y: block id ((z - HEADS) * grid.y + y) * grid.x + x is token id / P, part id % P,
// P = 1 + ceil(HEADS / rope_heads_per_block)), block (32 * WARPS).
// Arguments: W_UK's x, w, y and strides (matmul.cuh), then the rope-append's (mla_rope_append.cuh).
#include "matmul.cuh"
#include "mla_rope_append.cuh"

namespace kp {

// Before the PDL wait: W_UK's blocks ask L2 for their share of its first PREFETCH KiB (matmul.cuh).
template <int K, int N, int X_DT, int Y_DT, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, int PREFETCH, int C, int R, int HEADS,
          int INTERLEAVED, int Q_DT, int KV_DT>
__device__ void uk_rope_append_prefetch(const void* x, const void* w, void* y, int n_tokens, int x_row_stride, int x_batch_stride,
                                        int y_row_stride, int y_batch_stride, int w_batch_stride, const void*, const void*, const void*,
                                        void*, const void*, const void*, void*, const void*, int, int, int, int, int, int, int, float,
                                        float, float, float, float, float) {
  if (blockIdx.z < HEADS)
    matmul_prefetch<K, N, X_DT, Y_DT, 1, 0, 0, 0, WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, 0, PREFETCH, 0>(
        x, w, y, y, n_tokens, x_row_stride, x_batch_stride, y_row_stride, y_batch_stride, w_batch_stride, w, y, 0.f, w);
}

template <int K, int N, int X_DT, int Y_DT, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, int PREFETCH, int C, int R, int HEADS,
          int INTERLEAVED, int Q_DT, int KV_DT>
__device__ void uk_rope_append(const void* x, const void* w, void* y, int n_tokens, int x_row_stride, int x_batch_stride, int y_row_stride,
                               int y_batch_stride, int w_batch_stride, const void* latent, const void* norm_weight, const void* k_rope_src,
                               void* cache, const void* cache_len, const void* q_src, void* q_dst, const void* positions, int latent_stride,
                               int k_rope_stride, int max_slots, int q_src_row_stride, int q_src_head_stride, int q_dst_row_stride,
                               int q_dst_head_stride, float eps, float theta, float yarn_factor, float yarn_low, float yarn_high,
                               float cos_sin_scale) {
  if (blockIdx.z < HEADS) {
    matmul<K, N, X_DT, Y_DT, 1, 0, 0, 0, WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, 0, PREFETCH, 0>(
        x, w, y, y, n_tokens, x_row_stride, x_batch_stride, y_row_stride, y_batch_stride, w_batch_stride, w, y, 0.f, w);
    return;
  }
  constexpr int PARTS = 1 + (HEADS + rope_heads_per_block<R, HEADS, 32 * WARPS>() - 1) / rope_heads_per_block<R, HEADS, 32 * WARPS>();
  const int id = static_cast<int>(((blockIdx.z - HEADS) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
  mla_rope_append_block<C, R, HEADS, INTERLEAVED, X_DT, Q_DT, KV_DT, 32 * WARPS>(
      id / PARTS, id % PARTS, latent, norm_weight, k_rope_src, cache, cache_len, q_src, q_dst, positions, n_tokens, latent_stride,
      k_rope_stride, max_slots, q_src_row_stride, q_src_head_stride, q_dst_row_stride, q_dst_head_stride, eps, theta, yarn_factor,
      yarn_low, yarn_high, cos_sin_scale);
}

}  // namespace kp
