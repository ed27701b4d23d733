#pragma once
// MLA attention in absorbed form, split over the context (OPS mla_attention; DeepSeek-V3,
// Kimi K2.6): the same result as mla_attention.cuh,
//   score(t, h, s) = (q_latent[t, h, :] . kv[s, 0:C] + q_rope[t, h, :] . kv[s, C:C+R]) * softmax_scale
//   out[t, h, :]   = sum_s softmax_s(score) * kv[s, 0:C]
// over the same keys (every committed row s < L = *cache_len, plus this step's rows L + j that
// token t sees: j <= t without a tree_mask, else bit j % 32 of tree_mask[t * mask_words + j / 32]),
// in two kernels:
//   mla_split_partial: block (split, t, head group) walks one contiguous range of token t's keys
//                      for WARPS heads (one warp a head): it stages KT keys x (C + R) of the
//                      cache in shared memory (as f32) once, every head's warp reads them from
//                      there, and keeps per head the online-softmax state in f32 — running max m,
//                      sum l, and the unnormalised C-wide sum acc — which it writes to the
//                      workspace as the split's partial (m, l, acc[C]).
//   mla_split_combine: merges the n_splits partials of each (t, h) by log-sum-exp into out[t, h, :].
// Why: mla_attention runs one block per (head, token), so at K2.6 width (64 heads, C 512, R 64)
// every head re-reads the whole latent cache (1 token over 4,096 keys: 0.39 ms on an H200, the
// cache once would take ~9 us). Here the cache is read once per (token, split, head group) and the
// splits spread one token's keys over the SMs. Exact f32 math on the CUDA cores (FMAs), as the CPU
// op (runtime/cpu/mla_attention.h) to 1e-4 relative. The next step (not built): the score and
// value products on the tensor cores (bf16 mma over the staged tile: q [heads x C+R] x kv^T).
//
// Key ranges: token t's candidate keys are n_keys(t) = L + t + 1 (causal) or L + n_tokens (tree);
// split i of n_splits takes [i * per, min((i + 1) * per, n_keys(t))), per = ceil(n_keys(t) /
// n_splits), so any runtime L works with any n_splits; a split whose range is empty, or saw no
// visible key, writes m = -inf, l = 0, acc = 0, which the combine gives weight 0. A (t, h) that no
// key reached is written as zeros (as mla_attention does).
//
// Workspace: f32, partial (t, h, split) at ((t * HEADS + h) * n_splits + split) * (C + 2):
// [m, l, acc[0..C)].
//
// mla_split_partial template parameters:
//   HEADS   attention heads
//   C       kv_lora_rank (latent width)
//   R       qk_rope_head_dim
//   Q_DT    element type of q_latent and q_rope;  KV_DT  of the cache
//   WARPS   heads per block (one warp each); grid.z = ceil(HEADS / WARPS) head groups
//   KT      keys per staged tile (1..32; a warp's visibility bits are one ballot)
// Launch: grid (n_splits, n_tokens, ceil(HEADS / WARPS)), block (32 * WARPS), dynamic shared
// memory KT * (C + R) * 4 bytes.
// Arguments:
//   q_latent      Q_DT; (t, h) row at t * q_latent_row_stride + h * C
//   q_rope        Q_DT; (t, h) row at t * q_rope_row_stride + h * q_rope_head_stride
//   kv_cache      KV_DT [max_slots, C + R] (see kv_cache.cuh)
//   cache_len     int32 [1]: L
//   tree_mask     uint32 [n_tokens, mask_words], or null for causal
//   workspace     f32 [n_tokens, HEADS, n_splits, C + 2]
//   n_tokens, n_splits, q_latent_row_stride, q_rope_row_stride, q_rope_head_stride, mask_words,
//   softmax_scale
//
// mla_split_combine template parameters:
//   HEADS, C  as above;  O_DT  element type of out;  THREADS  threads per block
// Launch: grid (HEADS, n_tokens), block (THREADS).
// Arguments:
//   workspace     f32 [n_tokens, HEADS, n_splits, C + 2] (mla_split_partial's)
//   out           O_DT; (t, h) row at t * out_row_stride + h * C
//   n_tokens, n_splits, out_row_stride
#include "common.cuh"

namespace kp {

// Rows [base, base + nk) of the cache as f32 into tile [KT][D], rows past nk as zeros (the last
// key group reads them with weight 0). 16-byte loads (8 bf16 or 4 f32), all of a thread's issued
// before the first is converted: element-wise 2-byte loads (72 a thread at K2.6 width, one
// after another) held a 1-token step's split at ~30 us over 512 keys on the H200.
template <int D, int KV_DT, int KT, int THREADS>
__device__ __forceinline__ void stage_cache_tile(const void* kv_cache, int base, int nk, float* tile) {
  constexpr int VEC = KV_DT == BF16 ? 8 : 4;  // elements a 16-byte load holds
  if constexpr (D % VEC == 0) {
    constexpr int PER_ROW = D / VEC, TOTAL = KT * PER_ROW, ITERS = (TOTAL + THREADS - 1) / THREADS;
    uint4 raw[ITERS];
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * THREADS, k = e / PER_ROW;
      raw[it] = make_uint4(0u, 0u, 0u, 0u);
      if (e < TOTAL && k < nk)
        raw[it] = *static_cast<const uint4*>(offset<KV_DT>(kv_cache, static_cast<i64>(base + k) * D + (e - k * PER_ROW) * VEC));
    }
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * THREADS;
      if (e >= TOTAL) continue;
      float* dst = tile + e * VEC;  // row k = e / PER_ROW starts at k * D = k * PER_ROW * VEC
      if constexpr (KV_DT == BF16) {
        unpack8_bf16(raw[it], dst);
      } else {
        dst[0] = __uint_as_float(raw[it].x);
        dst[1] = __uint_as_float(raw[it].y);
        dst[2] = __uint_as_float(raw[it].z);
        dst[3] = __uint_as_float(raw[it].w);
      }
    }
  } else {
    for (int e = threadIdx.x; e < KT * D; e += THREADS) {
      const int k = e / D, col = e - k * D;
      tile[e] = k < nk ? load<KV_DT>(kv_cache, static_cast<i64>(base + k) * D + col) : 0.f;
    }
  }
}

template <int HEADS, int C, int R, int Q_DT, int KV_DT, int WARPS, int KT>
__device__ void mla_split_partial(const void* q_latent, const void* q_rope, const void* kv_cache,
                                  const void* cache_len, const void* tree_mask, void* workspace,
                                  int n_tokens, int n_splits, int q_latent_row_stride, int q_rope_row_stride,
                                  int q_rope_head_stride, int mask_words, float softmax_scale) {
  static_assert(KT >= 1 && KT <= 32, "KT keys per tile: 1..32");
  constexpr int D = C + R;
  constexpr int CPL = (C + 31) / 32;  // latent elements per lane
  constexpr int RPL = (R + 31) / 32;  // rope elements per lane
  constexpr int KG = 4;               // keys a warp scores at once (independent reductions)
  const int split = blockIdx.x, t = blockIdx.y;
  if (t >= n_tokens || split >= n_splits) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.z * WARPS + warp;
  const bool active = h < HEADS;
  const int past = max(static_cast<const int*>(cache_len)[0], 0);
  const unsigned* mask = static_cast<const unsigned*>(tree_mask);
  float* tile = static_cast<float*>(dynamic_smem());  // [KT][D]

  const int n_keys = mask == nullptr ? past + t + 1 : past + n_tokens;
  const int per = (n_keys + n_splits - 1) / n_splits;
  const int begin = min(split * per, n_keys), end = min(begin + per, n_keys);

  float ql[CPL], qr[RPL];
  {
    const int hq = active ? h : 0;
    const i64 qlo = static_cast<i64>(t) * q_latent_row_stride + static_cast<i64>(hq) * C;
    const i64 qro = static_cast<i64>(t) * q_rope_row_stride + static_cast<i64>(hq) * q_rope_head_stride;
#pragma unroll
    for (int i = 0; i < CPL; ++i) {
      const int c = lane + 32 * i;
      ql[i] = c < C ? load<Q_DT>(q_latent, qlo + c) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < RPL; ++i) {
      const int r = lane + 32 * i;
      qr[i] = r < R ? load<Q_DT>(q_rope, qro + r) : 0.f;
    }
  }

  float m = neg_inf(), l = 0.f, acc[CPL];
#pragma unroll
  for (int i = 0; i < CPL; ++i) acc[i] = 0.f;

  for (int base = begin; base < end; base += KT) {
    const int nk = min(KT, end - base);
    __syncthreads();  // the previous tile has been read
    stage_cache_tile<D, KV_DT, KT, 32 * WARPS>(kv_cache, base, nk, tile);
    // Lane k: is key base + k visible to token t?
    bool vis = false;
    if (lane < nk) {
      const int s = base + lane;
      if (s < past) {
        vis = true;
      } else {
        const int j = s - past;
        vis = mask == nullptr ? j <= t : ((mask[static_cast<i64>(t) * mask_words + j / 32] >> (j % 32)) & 1u) != 0;
      }
    }
    const unsigned visible = __ballot_sync(0xffffffffu, vis);
    __syncthreads();
    if (!active) continue;
    for (int k0 = 0; k0 < nk; k0 += KG) {
      if (((visible >> k0) & ((1u << KG) - 1u)) == 0u) continue;  // (KT <= 32: k0 + KG - 1 < 35 bits read as 0)
      float kl[KG][CPL], dot[KG];
#pragma unroll
      for (int g = 0; g < KG; ++g) {
        const float* row = tile + (k0 + g < KT ? k0 + g : KT - 1) * D;
        float d = 0.f;
#pragma unroll
        for (int i = 0; i < CPL; ++i) {
          const int c = lane + 32 * i;
          kl[g][i] = c < C ? row[c] : 0.f;
          d += ql[i] * kl[g][i];
        }
#pragma unroll
        for (int i = 0; i < RPL; ++i) {
          const int r = lane + 32 * i;
          if (r < R) d += qr[i] * row[C + r];
        }
        dot[g] = d;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int g = 0; g < KG; ++g) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], o);
      }
      float score[KG], m_new = m;
#pragma unroll
      for (int g = 0; g < KG; ++g) {
        const bool v = k0 + g < nk && ((visible >> (k0 + g)) & 1u) != 0;
        score[g] = v ? dot[g] * softmax_scale : neg_inf();
        m_new = fmaxf(m_new, score[g]);
      }
      // m_new is finite: the group holds a visible key.
      const float correction = expf(m - m_new);  // 0 while m = -inf
      float p[KG], psum = 0.f;
#pragma unroll
      for (int g = 0; g < KG; ++g) {
        p[g] = expf(score[g] - m_new);  // 0 for a hidden key
        psum += p[g];
      }
      l = l * correction + psum;
#pragma unroll
      for (int i = 0; i < CPL; ++i) {
        float a = acc[i] * correction;
#pragma unroll
        for (int g = 0; g < KG; ++g) a += p[g] * kl[g][i];
        acc[i] = a;
      }
      m = m_new;
    }
  }

  if (!active) return;
  float* w = static_cast<float*>(workspace) + ((static_cast<i64>(t) * HEADS + h) * n_splits + split) * (C + 2);
  if (lane == 0) {
    w[0] = m;
    w[1] = l;
  }
#pragma unroll
  for (int i = 0; i < CPL; ++i) {
    const int c = lane + 32 * i;
    if (c < C) w[2 + c] = acc[i];
  }
}

// Splits a combine takes at most (its per-split weights sit in shared memory; mla_split_count
// stays under mla_split_blocks, 2 x 188 on sm_120).
constexpr int kMlaMaxSplits = 512;

template <int HEADS, int C, int O_DT, int THREADS>
__device__ void mla_split_combine(const void* workspace, void* out, int n_tokens, int n_splits, int out_row_stride) {
  __shared__ float weight[kMlaMaxSplits];  // exp(m_s - m_all), 0 for a split no key reached
  __shared__ float weighted_l[kMlaMaxSplits];
  __shared__ float m_part[(THREADS + 31) / 32];
  const int h = blockIdx.x, t = blockIdx.y;
  if (t >= n_tokens) return;
  const float* w = static_cast<const float*>(workspace) + (static_cast<i64>(t) * HEADS + h) * n_splits * (C + 2);
  // Each thread reads its splits' (m, l) at once (one round trip, not one a split), the block
  // takes their max, then one exp a split for the whole block.
  float m_mine = neg_inf();
  for (int s = threadIdx.x; s < n_splits; s += THREADS)
    if (w[s * (C + 2) + 1] > 0.f) m_mine = fmaxf(m_mine, w[s * (C + 2)]);
  m_mine = warp_max(m_mine);
  if (threadIdx.x % 32 == 0) m_part[threadIdx.x / 32] = m_mine;
  __syncthreads();
  float m_all = neg_inf();
#pragma unroll
  for (int i = 0; i < (THREADS + 31) / 32; ++i) m_all = fmaxf(m_all, m_part[i]);
  for (int s = threadIdx.x; s < n_splits; s += THREADS) {
    const float ls = w[s * (C + 2) + 1];
    weight[s] = ls > 0.f ? expf(w[s * (C + 2)] - m_all) : 0.f;
    weighted_l[s] = ls > 0.f ? ls * weight[s] : 0.f;
  }
  __syncthreads();
  float l_all = 0.f;
  for (int s = 0; s < n_splits; ++s) l_all += weighted_l[s];  // in split order (deterministic)
  const float inv_l = l_all > 0.f ? 1.f / l_all : 0.f;
  const i64 o = static_cast<i64>(t) * out_row_stride + static_cast<i64>(h) * C;
  for (int c = threadIdx.x; c < C; c += THREADS) {
    float v = 0.f;
#pragma unroll 16
    for (int s = 0; s < n_splits; ++s) v += w[s * (C + 2) + 2 + c] * weight[s];  // weight 0: the split adds 0
    store<O_DT>(out, o + c, v * inv_l);
  }
}

}  // namespace kp
