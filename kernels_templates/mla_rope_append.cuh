#pragma once
// An MLA layer's small pre-attention ops in one launch (compiler/passes/rope_append.h fuses
// them; each is the OPS op of the same name, the arithmetic of rms_norm.cuh, rope.cuh and
// kv_cache.cuh):
//   kv_append(cache, concat(rms_norm(latent, norm_weight), rope(k_rope_src, positions)))
//   q_dst = rope(q_src, positions)                        (the queries' rope part; HEADS 0: none)
// A 1-token decode step runs these as four launches of ~2 us of work each (the kv_a_layernorm,
// two ropes, the append); a launch boundary inside a CUDA graph costs about as much as that
// work again, so one launch saves three of them per layer.
//
// Block (t, 0) writes token t's cache row L + t (L = *cache_len; none outside [0, max_slots),
// as kv_append): columns [0, C) the latent normalised in f32 (sum of squares, 1 / sqrt(mean +
// eps), times the bf16 weight), [C, C + R) the key's rope pairs; each value is rounded once,
// to KV_DT. Blocks (t, 1 + b) rotate the queries' heads b * HPB .. (rope_heads, HPB =
// rope_heads_per_block: about a pair a thread) from q_src into q_dst (which may alias it).
//
// Template parameters:
//   C, R         kv_lora_rank, qk_rope_head_dim (R even; THREADS >= R / 2)
//   HEADS        query heads whose rope this launch does (0: none)
//   INTERLEAVED  the rope layout (rope.cuh)
//   X_DT         element type of latent, k_rope_src and q_src
//   Q_DT         element type of q_dst
//   KV_DT        element type of the cache
//   THREADS      threads per block
// Launch: grid (n_tokens, 1 + ceil(HEADS / HPB)), block (THREADS).
// Arguments:
//   latent        X_DT, token t's C values at t * latent_stride
//   norm_weight   bf16 [C]
//   k_rope_src    X_DT, token t's R values at t * k_rope_stride
//   cache         KV_DT [max_slots, C + R]
//   cache_len     int32 [1]: L
//   q_src, q_dst  head h of token t at t * row_stride + h * head_stride (their own strides)
//   positions     int32 [n_tokens]
//   n_tokens, latent_stride, k_rope_stride, max_slots, q_src_row_stride, q_src_head_stride,
//   q_dst_row_stride, q_dst_head_stride, eps, theta, yarn_factor, yarn_low, yarn_high,
//   cos_sin_scale (rope.cuh)
#include "rms_norm.cuh"
#include "rope.cuh"

namespace kp {

// The work of block (t, part): part 0 writes token t's cache row, part 1 + b rotates the queries'
// head block b. Also the rope-append half of kernels_templates/uk_rope_append.cuh's launch.
template <int C, int R, int HEADS, int INTERLEAVED, int X_DT, int Q_DT, int KV_DT, int THREADS>
__device__ __forceinline__ void mla_rope_append_block(int t, int part, const void* latent, const void* norm_weight, const void* k_rope_src,
                                                      void* cache, const void* cache_len, const void* q_src, void* q_dst,
                                                      const void* positions, int n_tokens, int latent_stride, int k_rope_stride,
                                                      int max_slots, int q_src_row_stride, int q_src_head_stride, int q_dst_row_stride,
                                                      int q_dst_head_stride, float eps, float theta, float yarn_factor, float yarn_low,
                                                      float yarn_high, float cos_sin_scale) {
  static_assert(R % 2 == 0 && THREADS >= R / 2, "a thread per rope pair of the key");
  if (t >= n_tokens) return;
  if (part > 0) {
    if constexpr (HEADS > 0)
      rope_heads<R, HEADS, INTERLEAVED, X_DT, Q_DT, THREADS>(t, part - 1, q_src, q_dst, positions, q_src_row_stride, q_src_head_stride,
                                                             q_dst_row_stride, q_dst_head_stride, theta, yarn_factor, yarn_low, yarn_high,
                                                             cos_sin_scale);
    return;
  }
  constexpr int PER_THREAD = (C + THREADS - 1) / THREADS;
  // Every load (the latent, its weights, the key's pair, cache_len, the position) before any
  // store: a store may alias them for the compiler.
  float v[PER_THREAD], g[PER_THREAD];
  float ss = rms_norm_load<C, X_DT, THREADS>(latent, static_cast<i64>(t) * latent_stride, norm_weight, v, g);
  const int pair = threadIdx.x;  // < R / 2: this thread's key pair
  float ka = 0.f, kb = 0.f;
  if (pair < R / 2) {
    const i64 ko = static_cast<i64>(t) * k_rope_stride;
    const int ia = INTERLEAVED ? 2 * pair : pair, ib = INTERLEAVED ? 2 * pair + 1 : pair + R / 2;
    ka = load<X_DT>(k_rope_src, ko + ia);
    kb = load<X_DT>(k_rope_src, ko + ib);
  }
  const int row = static_cast<const int*>(cache_len)[0] + t;
  if (row < 0 || row >= max_slots) return;  // uniform over the block: before its reduction
  const float pos = static_cast<float>(static_cast<const int*>(positions)[t]);
  const float inv = row_rms_inverse<C, THREADS>(ss, eps);
  const i64 base = static_cast<i64>(row) * (C + R);
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int j = threadIdx.x + i * THREADS;
    if (j < C) store<KV_DT>(cache, base + j, g[i] * (v[i] * inv));
  }
  if (pair < R / 2) {
    float c, s;
    rope_cos_sin<R>(pair, pos, theta, yarn_factor, yarn_low, yarn_high, cos_sin_scale, c, s);
    const int oa = INTERLEAVED ? 2 * pair : pair, ob = INTERLEAVED ? 2 * pair + 1 : pair + R / 2;
    store<KV_DT>(cache, base + C + oa, ka * c - kb * s);
    store<KV_DT>(cache, base + C + ob, kb * c + ka * s);
  }
}

template <int C, int R, int HEADS, int INTERLEAVED, int X_DT, int Q_DT, int KV_DT, int THREADS>
__device__ void mla_rope_append(const void* latent, const void* norm_weight, const void* k_rope_src, void* cache,
                                const void* cache_len, const void* q_src, void* q_dst, const void* positions, int n_tokens,
                                int latent_stride, int k_rope_stride, int max_slots, int q_src_row_stride, int q_src_head_stride,
                                int q_dst_row_stride, int q_dst_head_stride, float eps, float theta, float yarn_factor,
                                float yarn_low, float yarn_high, float cos_sin_scale) {
  mla_rope_append_block<C, R, HEADS, INTERLEAVED, X_DT, Q_DT, KV_DT, THREADS>(
      static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), latent, norm_weight, k_rope_src, cache, cache_len, q_src, q_dst,
      positions, n_tokens, latent_stride, k_rope_stride, max_slots, q_src_row_stride, q_src_head_stride, q_dst_row_stride,
      q_dst_head_stride, eps, theta, yarn_factor, yarn_low, yarn_high, cos_sin_scale);
}

}  // namespace kp
