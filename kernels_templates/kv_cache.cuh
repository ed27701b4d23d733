#pragma once
// The MLA KV cache of one layer: KV_DT [max_slots, C + R]; row s holds cache position s, the
// normed latent c_kv in columns [0, C) and the roped key k_rope in [C, C + R) (ir/OPS.md).
//
// kv_append (OPS kv_append, in place): this step's token t goes to row L + t, L = *cache_len
//   (the committed length before this step): row[0, C) = latent_src[t], row[C, C+R) =
//   rope_src[t]. A row outside [0, max_slots) is not written: a verify step's padded tokens
//   near the end of the context (its bucket past the room left) and a graph warm-up on garbage
//   step inputs stay in bounds without touching a real token's row (clamping them onto the last
//   row overwrote the key of a real token that sat there).
//   Launch: grid (n_tokens), block (THREADS).
//   Arguments: latent_src (SRC_DT, row t at t * latent_src_stride), rope_src (SRC_DT, row t at
//   t * rope_src_stride), cache (KV_DT), cache_len (int32 [1]), n_tokens, latent_src_stride,
//   rope_src_stride, max_slots.
//
// kv_compact (OPS kv_compact, in place): keep the accepted path of a verify step: for
//   i < n = *n_keep, row L + keep[i] -> row L + i. keep[] must be increasing (a tree path whose
//   parents precede their children); then copying in order i = 0, 1, ... never reads a row
//   already overwritten. Each thread owns one column and walks i in order, so no two threads
//   touch the same element. n is clamped to [0, max_keep], keep[i] to [0, max_keep), rows to
//   [0, max_slots).
//   Launch: grid (ceil((C + R) / THREADS)), block (THREADS).
//   Arguments: cache (KV_DT), cache_len (int32 [1]), keep (int32 [max_keep]), n_keep (int32
//   [1]), max_keep, max_slots.
//
// Template parameters: C (kv_lora_rank), R (qk_rope_head_dim), SRC_DT / KV_DT element types,
// THREADS threads per block.
#include "common.cuh"

namespace kp {

template <int C, int R, int SRC_DT, int KV_DT, int THREADS>
__device__ void kv_append(const void* latent_src, const void* rope_src, void* cache,
                          const void* cache_len, int n_tokens, int latent_src_stride,
                          int rope_src_stride, int max_slots) {
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  const int row = static_cast<const int*>(cache_len)[0] + t;
  if (row < 0 || row >= max_slots) return;
  const i64 base = static_cast<i64>(row) * (C + R);
  for (int j = threadIdx.x; j < C + R; j += THREADS) {
    const float v = j < C ? load<SRC_DT>(latent_src, static_cast<i64>(t) * latent_src_stride + j)
                          : load<SRC_DT>(rope_src, static_cast<i64>(t) * rope_src_stride + (j - C));
    store<KV_DT>(cache, base + j, v);
  }
}

template <int C, int R, int KV_DT, int THREADS>
__device__ void kv_compact(void* cache, const void* cache_len, const void* keep,
                           const void* n_keep, int max_keep, int max_slots) {
  constexpr int D = C + R;
  const int col = blockIdx.x * THREADS + threadIdx.x;
  if (col >= D) return;
  const int start = clamp_int(static_cast<const int*>(cache_len)[0], 0, max_slots - 1);
  const int n = clamp_int(static_cast<const int*>(n_keep)[0], 0, max_keep);
  const int* path = static_cast<const int*>(keep);
  for (int i = 0; i < n; ++i) {
    const int src = clamp_int(start + clamp_int(path[i], 0, max_keep - 1), 0, max_slots - 1);
    const int dst = clamp_int(start + i, 0, max_slots - 1);
    if (src == dst) continue;
    if constexpr (KV_DT == F32) {
      float* p = static_cast<float*>(cache);
      p[static_cast<i64>(dst) * D + col] = p[static_cast<i64>(src) * D + col];
    } else {
      unsigned short* p = static_cast<unsigned short*>(cache);
      p[static_cast<i64>(dst) * D + col] = p[static_cast<i64>(src) * D + col];
    }
  }
}

}  // namespace kp
