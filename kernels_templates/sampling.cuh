#pragma once
// Token selection on lm_head logits (lm_head itself is a kp::matmul with f32 output).
//
// argmax: out_ids[r] = the index of the largest logit of row r (ties: the smaller index), or -1
//         when the row holds a NaN or an infinity (the CPU reference refuses such a row; the
//         check is free here, the kernel reads every logit anyway, so a damaged weight or an
//         overflow surfaces as an error on the host instead of a greedy decode of junk).
// topk:   the K largest logits of row r in descending order (ties: the smaller index first);
//         out_vals holds them as log-probabilities (LOGPROB = 1: logit - logsumexp(row)) or as
//         raw logits (LOGPROB = 0). DDTree's drafter proposals use the log-probabilities.
//
// Template parameters: V (vocab), K (topk only), X_DT logits element type, LOGPROB, THREADS,
// CLUSTER (argmax only: blocks per row).
// Launch: topk grid (n_rows), block (THREADS); argmax grid (CLUSTER, n_rows), block (THREADS),
// cluster (CLUSTER, 1, 1) when CLUSTER > 1: one block alone streams a K2.6 row (163840 logits,
// 640 KiB) at ~13 GB/s (49 us on the H200), so a row is dealt over CLUSTER blocks on as many
// SMs, interleaved by stripes of THREADS 16-byte loads (f32 rows of 4k logits, aligned;
// otherwise of THREADS logits), and rank 0 merges their bests through distributed shared
// memory (sm_90+; no counter to reset between CUDA graph replays).
// Arguments:
//   argmax: logits (row r at r * row_stride), out_ids (int32 [n_rows]), n_rows, row_stride
//   topk:   logits, out_ids (int32 [n_rows, K]), out_vals (f32 [n_rows, K]), n_rows, row_stride
#include "common.cuh"

namespace kp {

template <int V, int X_DT, int THREADS, int CLUSTER>
__device__ void argmax(const void* logits, void* out_ids, int n_rows, int row_stride) {
  static_assert(CLUSTER >= 1 && CLUSTER <= 8, "a portable cluster holds at most 8 blocks");
  const int r = blockIdx.y;
  if (r >= n_rows) return;  // a cluster shares its row: all of its blocks return together
  const int part = blockIdx.x;  // = the cluster rank: grid.x is CLUSTER, one cluster a row
  const i64 base = static_cast<i64>(r) * row_stride;
  float best = neg_inf();
  int index = 1 << 30;
  int non_finite = 0;
  // Each thread keeps the first of its largest logits: visited in increasing j.
  auto take = [&](float v, int j) {
    non_finite |= !isfinite(v);
    if (v > best || index == (1 << 30)) {
      best = v;
      index = j;
    }
  };
  const float* row = static_cast<const float*>(logits) + base;
  if (X_DT == F32 && V % 4 == 0 && (reinterpret_cast<unsigned long long>(row) & 15u) == 0) {
    // 16-byte loads, U of them issued before any compare: a thread's share of a K2.6 row (five
    // float4s) is one L2 round trip instead of twenty dependent ones (the scalar loop's ~6 us
    // inside the step's graph on the H100, bench/RESULTS.md 2026-12-07).
    constexpr int CHUNKS = V / 4, STRIDE = THREADS * CLUSTER, U = 8;
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int c0 = part * THREADS + threadIdx.x; c0 < CHUNKS; c0 += STRIDE * U) {
      float4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * STRIDE;
        v[u] = c < CHUNKS ? row4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * STRIDE;
        if (c >= CHUNKS) break;
        take(v[u].x, 4 * c);
        take(v[u].y, 4 * c + 1);
        take(v[u].z, 4 * c + 2);
        take(v[u].w, 4 * c + 3);
      }
    }
  } else {
    for (int j = part * THREADS + threadIdx.x; j < V; j += THREADS * CLUSTER) take(load<X_DT>(logits, base + j), j);
  }
  non_finite = __syncthreads_or(non_finite);
  block_argmax<THREADS>(best, index);
  if constexpr (CLUSTER > 1) {
    __shared__ unsigned mine[3];  // this block's best (as bits), its index, its non-finite flag
    if (threadIdx.x == 0) {
      mine[0] = __float_as_uint(best);
      mine[1] = static_cast<unsigned>(index);
      mine[2] = static_cast<unsigned>(non_finite);
    }
    cluster_sync();
    if (part == 0 && threadIdx.x == 0) {
      for (unsigned b = 1; b < CLUSTER; ++b) {
        const float v = __uint_as_float(cluster_load_u32(&mine[0], b));
        const int i = static_cast<int>(cluster_load_u32(&mine[1], b));
        non_finite |= static_cast<int>(cluster_load_u32(&mine[2], b));
        if (i != (1 << 30) && (v > best || (v == best && i < index) || index == (1 << 30))) {
          best = v;
          index = i;
        }
      }
    }
    cluster_sync();  // the other blocks' shared memory stays until rank 0 has read it
  }
  if (part == 0 && threadIdx.x == 0) static_cast<int*>(out_ids)[r] = non_finite ? -1 : index;
}

// topk by radix select (one block per row): four 8-bit digit passes find the K-th largest key T
// and how many of the keys equal to T belong to the top K; the keys above T are gathered and
// ranked among themselves, the ties at T are taken in index order. About eight passes over the
// row whatever K is (a pass per rank would be K passes).
template <int V, int K, int X_DT, int LOGPROB, int THREADS>
__device__ void topk(const void* logits, void* out_ids, void* out_vals, int n_rows, int row_stride) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  const int r = blockIdx.x;
  if (r >= n_rows) return;
  const i64 base = static_cast<i64>(r) * row_stride;
  float lse = 0.f;
  if constexpr (LOGPROB) {
    float m = neg_inf();
    for (int j = threadIdx.x; j < V; j += THREADS) m = fmaxf(m, load<X_DT>(logits, base + j));
    m = block_max<THREADS>(m);
    float s = 0.f;
    for (int j = threadIdx.x; j < V; j += THREADS) s += expf(load<X_DT>(logits, base + j) - m);
    lse = m + logf(block_sum<THREADS>(s));
  }

  __shared__ unsigned hist[256];
  __shared__ unsigned digit_prefix, digit_remaining;
  unsigned prefix = 0, mask = 0, remaining = K;  // keys matching prefix under mask; how many still wanted
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += THREADS) hist[b] = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < V; j += THREADS) {
      const unsigned key = order_key(load<X_DT>(logits, base + j));
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned above = 0;
      for (int b = 255; b >= 0; --b) {
        if (above + hist[b] >= remaining) {
          digit_prefix = prefix | (static_cast<unsigned>(b) << shift);
          digit_remaining = remaining - above;
          break;
        }
        above += hist[b];
      }
    }
    __syncthreads();
    prefix = digit_prefix;
    remaining = digit_remaining;
    mask |= 255u << shift;
  }
  // prefix is T; `remaining` of the keys equal to T complete the top K after the K - remaining above it.
  const int greater = K - static_cast<int>(remaining);
  __shared__ float cand_v[K];
  __shared__ int cand_i[K];
  __shared__ int n_greater;
  __shared__ int warp_ties[THREADS / 32];
  if (threadIdx.x == 0) n_greater = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < V; j += THREADS) {
    const float v = load<X_DT>(logits, base + j);
    if (order_key(v) > prefix) {
      const int slot = atomicAdd(&n_greater, 1);
      cand_v[slot] = v;
      cand_i[slot] = j;
    }
  }
  // Ties at T in index order: a chunk of THREADS consecutive ids at a time, ranked by ballot.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int ties = 0;
  for (int c = 0; c < V && ties < static_cast<int>(remaining); c += THREADS) {
    const int j = c + threadIdx.x;
    const float v = j < V ? load<X_DT>(logits, base + j) : 0.f;
    const bool tie = j < V && order_key(v) == prefix;
    const unsigned ballot = __ballot_sync(0xffffffffu, tie);
    if (lane == 0) warp_ties[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < THREADS / 32; ++w) {
      if (w < warp) before += warp_ties[w];
      total += warp_ties[w];
    }
    const int slot = ties + before + __popc(ballot & ((1u << lane) - 1u));
    if (tie && slot < static_cast<int>(remaining)) {
      cand_v[greater + slot] = v;
      cand_i[greater + slot] = j;
    }
    ties += total;
    __syncthreads();
  }
  __syncthreads();
  // Rank the keys above T among themselves (value descending, index ascending); ties follow.
  for (int t = threadIdx.x; t < K; t += THREADS) {
    int rank = t;
    if (t < greater) {
      rank = 0;
      for (int u = 0; u < greater; ++u)
        rank += cand_v[u] > cand_v[t] || (cand_v[u] == cand_v[t] && cand_i[u] < cand_i[t]);
    }
    static_cast<int*>(out_ids)[static_cast<i64>(r) * K + rank] = cand_i[t];
    static_cast<float*>(out_vals)[static_cast<i64>(r) * K + rank] = cand_v[t] - lse;
  }
}

}  // namespace kp
