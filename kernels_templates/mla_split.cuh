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
//   mla_split_combine: merges the n_splits partials of each (t, h) by log-sum-exp into out[t, h, :],
//                      C / CH columns a block (CH blocks a head: 64 heads alone leave half an
//                      H200's SMs idle while the 132 partials of a long context are read back).
//                      Or mla_split_combine_uv (below): the combine and W_UV's product in one.
// Why: mla_attention runs one block per (head, token), so at K2.6 width (64 heads, C 512, R 64)
// every head re-reads the whole latent cache (1 token over 4,096 keys: 0.39 ms on an H200, the
// cache once would take ~9 us). Here the cache is read once per (token, split, head group) and the
// splits spread one token's keys over the SMs. Exact f32 math on the CUDA cores (FMAs), as the CPU
// op (runtime/cpu/mla_attention.h) to 1e-4 relative.
// MMA 1 (a bf16 cache): the same partials from the tensor cores. A block takes 16 heads of token t
// (one m-tile: the heads are the MMA's M) and a tile of KT keys staged as bf16; its warps first
// score the tile (S = q [16 x C+R] . kv^T, mma.sync m16n8k16, an 8-key n-tile a warp), then each
// warp keeps the online softmax of all 16 rows and the C / WARPS output columns it owns
// (acc += P . kv[:, 0:C]). 64 heads over one cache row are ~120 FLOP a byte: the CUDA cores bind
// the MMA 0 path long before HBM does. f32 queries and the probabilities enter as bf16 hi + lo
// (two MMAs each: products exact, values kept to 2^-16 of themselves), so the result stays
// within f32 summation-order differences of the CPU op, as the dense matmul's tensor-core path.
// MMA 2 (a bf16 cache): a block takes every head of token
// t (HEADS / 16 m-tiles, two warps each), so the cache is read once per (token, split) and one
// block fills an SM (the queries, a 3-tile cp.async ring and the probabilities: 189 KiB at K2.6
// width). Per tile of 32 keys: warp (m-tile, key half) scores its 16 heads x 16 keys over C + R
// (ldmatrix fragments of the queries and keys, mma.sync m16n8k16), the two halves' row maxima meet
// in shared memory, each warp writes its probabilities there as bf16; then every warp takes all
// heads x its C / WARPS output columns (acc += P . V, the values' B fragments by ldmatrix.trans).
// The queries (f32 ones rounded once staged) and the probabilities enter the MMA as bf16 (~2e-3
// relative on the output, within the bf16 data path's 1e-2). A split takes at least one tile: a short
// context leaves the later splits empty (m = -inf, l = 0, the sums unwritten: the combine reads no
// sum of a split it gives weight 0). MMA 3: the same block, each scoring warp holding its 16
// heads' queries over one depth half (C + R by 32) in registers and scoring all 32 keys over it;
// the halves meet in shared memory (half the fragment bytes MMA 2 reads from it a tile).
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
//   WARPS   MMA 0: heads per block (one warp each); grid.z = ceil(HEADS / WARPS) head groups.
//           MMA 1: warps per block, each owning C / WARPS output columns of the block's 16 heads
//   KT      keys per staged tile (1..32; a warp's visibility bits are one ballot; MMA 1: 16 or 32)
//   MMA     0: CUDA cores; 1: tensor cores (KV_DT bf16, HEADS % 16 == 0, (C + R) % 16 == 0,
//           C % (8 * WARPS) == 0); grid.z = HEADS / 16. 2: tensor cores, every head a block
//           (KV_DT bf16, HEADS % 16 == 0, (C + R) % 16 == 0, WARPS = HEADS / 8, KT 32,
//           C % (16 * WARPS) == 0); grid.z = 1. 3: MMA 2 with (C + R) % 32 == 0
// Launch: grid (n_splits, n_tokens, head groups), block (32 * WARPS), dynamic shared memory
// mla_split_smem_bytes (MMA 0: KT * (C + R) * 4 bytes; MMA 1: the bf16 tile, the queries' hi and
// lo rows and the tile's f32 scores; MMA 2: MlaWideSmem; families/mla_split.cc).
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
//   CH        column chunks (C % CH == 0): a block sums C / CH columns; where that is fewer than
//             THREADS, G = THREADS / (C / CH) groups of threads share them, group g summing splits
//             g, g + G, ..., the groups' sums added in group order
// Launch: grid (HEADS, n_tokens, CH), block (THREADS).
// Arguments:
//   workspace     f32 [n_tokens, HEADS, n_splits, C + 2] (mla_split_partial's)
//   out           O_DT; (t, h) row at t * out_row_stride + h * C
//   n_tokens, n_splits, out_row_stride
#include "weight_dot.cuh"  // mma_bf16_16816, pack_bf16x2, bf16_residual

namespace kp {

// Rows [base, base + nk) of the cache as f32 into tile [KT][D]: only the keys `visible` names
// (bit k: key base + k), the others and rows past nk as zeros. A hidden key enters the P.V sum
// with weight 0, and 0 times whatever its row held (a verify step's padded tokens write rows no
// real token sees, and near the end of the context their rows lie past the cache, in a
// neighbouring buffer: NaN there made a real token's output NaN) must stay 0. 16-byte loads
// (8 bf16 or 4 f32), all of a thread's issued before the first is converted: element-wise
// 2-byte loads (72 a thread at K2.6 width, one after another) held a 1-token step's split at
// ~30 us over 512 keys on the H200.
template <int D, int KV_DT, int KT, int THREADS>
__device__ __forceinline__ void stage_cache_tile(const void* kv_cache, int base, int nk, unsigned visible, float* tile) {
  constexpr int VEC = KV_DT == BF16 ? 8 : 4;  // elements a 16-byte load holds
  if constexpr (D % VEC == 0) {
    constexpr int PER_ROW = D / VEC, TOTAL = KT * PER_ROW, ITERS = (TOTAL + THREADS - 1) / THREADS;
    uint4 raw[ITERS];
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * THREADS, k = e / PER_ROW;
      raw[it] = make_uint4(0u, 0u, 0u, 0u);
      if (e < TOTAL && k < nk && ((visible >> k) & 1u) != 0u)
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
      tile[e] = k < nk && ((visible >> k) & 1u) != 0u ? load<KV_DT>(kv_cache, static_cast<i64>(base + k) * D + col) : 0.f;
    }
  }
}

// Bits k < nk of keys base + k that token t sees (the same for every head, lane k decides).
__device__ __forceinline__ unsigned mla_visible_keys(int base, int nk, int past, int t, const unsigned* mask, int mask_words) {
  const int lane = threadIdx.x % 32;
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
  return __ballot_sync(0xffffffffu, vis);
}

// ---- MMA 1: the tensor-core partial (see the doc block) ----

// Elements a staged bf16 row holds past its C + R, so the 8 rows an MMA fragment reads start in
// different banks (a row of 576 elements is 288 words, every row in one bank otherwise).
constexpr int kMlaMmaPad = 8;

// The 32-bit word (two bf16) at element e of a staged row (e even).
__device__ __forceinline__ unsigned mla_word(const unsigned short* row, int e) { return *reinterpret_cast<const unsigned*>(row + e); }

// The block's HG query rows [q_latent | q_rope] of token t, heads h0.., as padded bf16 rows: hi,
// and (f32 queries, ql not null) lo = the f32 residual. 16-byte loads, all of a thread's issued before the first
// store (a store may alias them for the compiler: one round trip each otherwise) where the
// pointers and strides allow, else element by element.
template <int C, int R, int Q_DT, int THREADS, int HG = 16>
__device__ __forceinline__ void mla_stage_queries(const void* q_latent, const void* q_rope, int t, int h0, int q_latent_row_stride,
                                                  int q_rope_row_stride, int q_rope_head_stride, unsigned short* qh, unsigned short* ql) {
  constexpr int D = C + R, DP = D + kMlaMmaPad;
  constexpr int QV = Q_DT == F32 ? 4 : 8;  // elements a 16-byte load holds
  const i64 lat0 = static_cast<i64>(t) * q_latent_row_stride + static_cast<i64>(h0) * C;
  const i64 rot0 = static_cast<i64>(t) * q_rope_row_stride + static_cast<i64>(h0) * q_rope_head_stride;
  auto source = [&](int r, int d) { return d < C ? offset<Q_DT>(q_latent, lat0 + static_cast<i64>(r) * C + d)
                                                 : offset<Q_DT>(q_rope, rot0 + static_cast<i64>(r) * q_rope_head_stride + d - C); };
  auto put = [&](int r, int d, float v) {
    const unsigned short hi = f32_to_bf16(v);
    qh[r * DP + d] = hi;
    if constexpr (Q_DT == F32)
      if (ql != nullptr) ql[r * DP + d] = f32_to_bf16(v - bf16_to_f32(hi));
  };
  const bool vec = C % QV == 0 && R % QV == 0 && ((reinterpret_cast<unsigned long long>(q_latent) | reinterpret_cast<unsigned long long>(q_rope)) & 15u) == 0 &&
                   q_latent_row_stride % QV == 0 && q_rope_row_stride % QV == 0 && q_rope_head_stride % QV == 0;
  if (!vec) {
    for (int e = threadIdx.x; e < HG * D; e += THREADS) {
      const int r = e / D, d = e - r * D;
      put(r, d, load<Q_DT>(source(r, d), 0));
    }
    return;
  }
  constexpr int PER_ROW = D / QV, TOTAL = HG * PER_ROW, ITERS = (TOTAL + THREADS - 1) / THREADS;
  uint4 raw[ITERS];
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int e = static_cast<int>(threadIdx.x) + it * THREADS, r = e / PER_ROW;
    raw[it] = e < TOTAL ? *static_cast<const uint4*>(source(r, (e - r * PER_ROW) * QV)) : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int e = static_cast<int>(threadIdx.x) + it * THREADS, r = e / PER_ROW, d = (e - r * PER_ROW) * QV;
    if (e >= TOTAL) continue;
    if constexpr (Q_DT == F32) {  // 4 elements as one 8-byte store (d % 4 == 0, DP % 8 == 0)
      const float v[4] = {__uint_as_float(raw[it].x), __uint_as_float(raw[it].y), __uint_as_float(raw[it].z), __uint_as_float(raw[it].w)};
      const uint2 hi{pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3])};
      *reinterpret_cast<uint2*>(qh + r * DP + d) = hi;
      if (ql != nullptr)
        *reinterpret_cast<uint2*>(ql + r * DP + d) = uint2{pack_bf16x2(bf16_residual(v[0]), bf16_residual(v[1])),
                                                           pack_bf16x2(bf16_residual(v[2]), bf16_residual(v[3]))};
    } else {
      *reinterpret_cast<uint4*>(qh + r * DP + d) = raw[it];  // bf16 queries: the words as they are
    }
  }
}

// Rows [base, base + nk) of a bf16 cache into the padded bf16 rows tile[KT][DP] by cp.async,
// every 16-byte piece of a thread in flight at once (no register round trip each); the keys the
// token does not see and rows past nk as zeros (their scores are masked, and their P.V weight 0
// must meet a finite row: stage_cache_tile). The caller commits the group.
template <int D, int DP, int KT, int THREADS>
__device__ __forceinline__ void mla_stage_tile_async(const void* kv_cache, int base, int nk, unsigned visible, unsigned short* tile) {
  constexpr int PIECES = D / 8;
#pragma unroll 1
  for (int e = threadIdx.x; e < KT * PIECES; e += THREADS) {
    const int k = e / PIECES, p = e - k * PIECES;
    const bool seen = k < nk && ((visible >> k) & 1u) != 0u;
    cp_async16<true>(tile + k * DP + 8 * p, offset<BF16>(kv_cache, static_cast<i64>(base + (seen ? k : 0)) * D + 8 * p), seen);
  }
}

template <int HEADS, int C, int R, int Q_DT, int WARPS, int KT>
__device__ void mla_split_partial_mma(const void* q_latent, const void* q_rope, const void* kv_cache, const void* cache_len,
                                      const void* tree_mask, void* workspace, int n_tokens, int n_splits, int q_latent_row_stride,
                                      int q_rope_row_stride, int q_rope_head_stride, int mask_words, float softmax_scale) {
  constexpr int D = C + R, DP = D + kMlaMmaPad;
  constexpr int HG = 16;             // heads a block: one m-tile
  constexpr int CW = C / WARPS;      // output columns a warp owns
  constexpr int NTO = CW / 8;        // their n-tiles
  constexpr int NTS = KT / 8;        // the tile's key n-tiles (scores)
  constexpr bool QLO = Q_DT == F32;  // f32 queries: a lo row beside the hi one
  static_assert(HEADS % HG == 0 && D % 16 == 0 && C % (8 * WARPS) == 0 && (KT == 16 || KT == 32), "MMA 1 shapes");
  const int split = blockIdx.x, t = blockIdx.y, h0 = blockIdx.z * HG;
  if (t >= n_tokens || split >= n_splits) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int past = max(static_cast<const int*>(cache_len)[0], 0);
  const unsigned* mask = static_cast<const unsigned*>(tree_mask);
  unsigned short* kt = static_cast<unsigned short*>(dynamic_smem());  // [KT][DP] the staged keys
  unsigned short* qh = kt + KT * DP;                                 // [HG][DP] queries (hi)
  unsigned short* ql = qh + HG * DP;                                 // [HG][DP] their lo parts (QLO)
  float* st = reinterpret_cast<float*>(ql + (QLO ? HG * DP : 0));    // [HG][KT + 1] the tile's scaled scores

  const int n_keys = mask == nullptr ? past + t + 1 : past + n_tokens;
  const int per = (n_keys + n_splits - 1) / n_splits;
  const int begin = min(split * per, n_keys), end = min(begin + per, n_keys);

  mla_stage_queries<C, R, Q_DT, 32 * WARPS>(q_latent, q_rope, t, h0, q_latent_row_stride, q_rope_row_stride, q_rope_head_stride, qh, ql);

  // Rows g and g + 8 of the m-tile: running max, sum, and this warp's output columns.
  float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.f, 0.f}, o[NTO][4];
#pragma unroll
  for (int j = 0; j < NTO; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;

  for (int base = begin; base < end; base += KT) {
    const int nk = min(KT, end - base);
    __syncthreads();  // the previous tile's keys and scores have been read
    const unsigned visible = mla_visible_keys(base, nk, past, t, mask, mask_words);
    mla_stage_tile_async<D, DP, KT, 32 * WARPS>(kv_cache, base, nk, visible, kt);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if (visible == 0u) continue;  // uniform: no head of this token sees a key of the tile
    // Scores: warp w takes key n-tiles w, w + WARPS, ...: S[16 x 8] over the D dims, 16 a k-step,
    // in four accumulator chains (even / odd k-steps, hi / lo: the MMA's latency, not its rate,
    // binds one chain of D / 16 x 2 dependent MMAs), added at the end.
    for (int j = warp; j < NTS; j += WARPS) {
      float cc[4][4] = {};
      const unsigned short* krow = kt + (8 * j + g) * DP;
#pragma unroll 4
      for (int k0 = 0; k0 < D; k0 += 16) {
        const int chain = (k0 / 16) % 2;
        const unsigned b0 = mla_word(krow, k0 + 2 * q), b1 = mla_word(krow, k0 + 2 * q + 8);
        const unsigned a[4] = {mla_word(qh + g * DP, k0 + 2 * q), mla_word(qh + (g + 8) * DP, k0 + 2 * q),
                               mla_word(qh + g * DP, k0 + 2 * q + 8), mla_word(qh + (g + 8) * DP, k0 + 2 * q + 8)};
        mma_bf16_16816(cc[chain], a, b0, b1);
        if constexpr (QLO) {
          const unsigned al[4] = {mla_word(ql + g * DP, k0 + 2 * q), mla_word(ql + (g + 8) * DP, k0 + 2 * q),
                                  mla_word(ql + g * DP, k0 + 2 * q + 8), mla_word(ql + (g + 8) * DP, k0 + 2 * q + 8)};
          mma_bf16_16816(cc[2 + chain], al, b0, b1);
        }
      }
      float c[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) c[e] = (cc[0][e] + cc[1][e]) + (cc[2][e] + cc[3][e]);
      // c: rows g (keys 8j + 2q, + 1), g + 8 (the same keys); a hidden key's score is -inf.
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = 8 * j + 2 * q + (e & 1), row = g + (e >= 2 ? 8 : 0);
        st[row * (KT + 1) + key] = ((visible >> key) & 1u) ? c[e] * softmax_scale : neg_inf();
      }
    }
    __syncthreads();
    // Online softmax of rows g, g + 8 (every warp alike: the same values in the same order). A
    // lane holds keys 16 ks + 2q + {0, 1, 8, 9} of each k-step ks: its P fragment's columns.
    float p[2][KT / 16][4], rmax[2] = {neg_inf(), neg_inf()};
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int ks = 0; ks < KT / 16; ++ks)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[r][ks][e] = st[(g + 8 * r) * (KT + 1) + 16 * ks + 2 * q + (e & 1) + (e >= 2 ? 8 : 0)];
          rmax[r] = fmaxf(rmax[r], p[r][ks][e]);
        }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rmax[r] = fmaxf(rmax[r], __shfl_xor_sync(0xffffffffu, rmax[r], 1));
      rmax[r] = fmaxf(rmax[r], __shfl_xor_sync(0xffffffffu, rmax[r], 2));
      const float m_new = fmaxf(m[r], rmax[r]);  // finite: the tile holds a visible key
      corr[r] = expf(m[r] - m_new);              // 0 while m = -inf
      float sum = 0.f;
#pragma unroll
      for (int ks = 0; ks < KT / 16; ++ks)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[r][ks][e] = expf(p[r][ks][e] - m_new);  // 0 for a hidden key
          sum += p[r][ks][e];
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      l[r] = l[r] * corr[r] + sum;
      m[r] = m_new;
    }
#pragma unroll
    for (int j = 0; j < NTO; ++j) {
      o[j][0] *= corr[0];
      o[j][1] *= corr[0];
      o[j][2] *= corr[1];
      o[j][3] *= corr[1];
    }
    // acc += P . V over the tile's keys (V = the staged rows' first C columns, this warp's).
#pragma unroll
    for (int ks = 0; ks < KT / 16; ++ks) {
      const unsigned hi[4] = {pack_bf16x2(p[0][ks][0], p[0][ks][1]), pack_bf16x2(p[1][ks][0], p[1][ks][1]),
                              pack_bf16x2(p[0][ks][2], p[0][ks][3]), pack_bf16x2(p[1][ks][2], p[1][ks][3])};
      const unsigned lo[4] = {pack_bf16x2(bf16_residual(p[0][ks][0]), bf16_residual(p[0][ks][1])),
                              pack_bf16x2(bf16_residual(p[1][ks][0]), bf16_residual(p[1][ks][1])),
                              pack_bf16x2(bf16_residual(p[0][ks][2]), bf16_residual(p[0][ks][3])),
                              pack_bf16x2(bf16_residual(p[1][ks][2]), bf16_residual(p[1][ks][3]))};
      const unsigned short* v0 = kt + (16 * ks + 2 * q) * DP;  // keys 2q, 2q + 1, 2q + 8, 2q + 9 of the k-step
#pragma unroll
      for (int j = 0; j < NTO; ++j) {
        const int col = warp * CW + 8 * j + g;
        const unsigned b0 = v0[col] | (static_cast<unsigned>(v0[DP + col]) << 16);
        const unsigned b1 = v0[8 * DP + col] | (static_cast<unsigned>(v0[9 * DP + col]) << 16);
        mma_bf16_16816(o[j], hi, b0, b1);
        mma_bf16_16816(o[j], lo, b0, b1);
      }
    }
  }

  // The partials of rows g, g + 8: (m, l) once per row, then this warp's columns.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float* w = static_cast<float*>(workspace) + ((static_cast<i64>(t) * HEADS + h0 + g + 8 * r) * n_splits + split) * (C + 2);
    if (warp == 0 && q == 0) {
      w[0] = m[r];
      w[1] = l[r];
    }
#pragma unroll
    for (int j = 0; j < NTO; ++j) {
      const int col = warp * CW + 8 * j + 2 * q;
      w[2 + col] = o[j][2 * r];
      w[3 + col] = o[j][2 * r + 1];
    }
  }
}

// ---- MMA 2 and 3: every head of the token in one block (see the doc block) ----

// Tiles in the all-heads partial's cp.async ring: two in flight while the block works on a third.
constexpr int kMlaWideStages = 3;

// The all-heads partial's shared memory, in bf16 elements from the start: the queries
// [HEADS][DP], the ring's tiles [kMlaWideStages][KT][DP], the probabilities [HEADS][PP]; then f32
// from byte F32: each key half's row maxima [2][HEADS], the rows' rescaling [HEADS], each key
// half's row sums [2][HEADS]; MMA 3 (QREG) then the second depth half's scores [HEADS][SP]. Every
// part starts 16-byte aligned (DP, PP and SP are multiples of 8). The host's mla_split_smem_bytes
// (families/mla_split.cc) mirrors BYTES.
// Query rows the all-heads partial stages a pass: m-tiles of 16 doubled while they divide HEADS
// and a thread's share stays within 18 16-byte loads in registers (at K2.6 width every head in
// one pass for bf16 queries, two of 32 for f32): one round trip a pass, not one an m-tile.
template <int HEADS, int D, int Q_DT, int THREADS>
__host__ __device__ constexpr int mla_query_rows_a_pass() {
  const int per_row = D / (Q_DT == F32 ? 4 : 8);
  int rows = 16;
  while (HEADS % (2 * rows) == 0 && 2 * rows * per_row <= 18 * THREADS) rows *= 2;
  return rows;
}

template <int HEADS, int C, int R, int KT, bool QREG>
struct MlaWideSmem {
  static constexpr int D = C + R, DP = D + kMlaMmaPad, PP = KT + 8, SP = KT + 8;
  static constexpr int TILES = HEADS * DP, P = TILES + kMlaWideStages * KT * DP, F32 = 2 * (P + HEADS * PP);
  static constexpr int SCORES = F32 + 5 * HEADS * 4;
  // The block's sums [HEADS][OS] f32 staged at the start once the tiles are done (over the queries
  // and the ring: P bf16 elements, 2 * P bytes, hold them at every shape the partial takes).
  static constexpr int OS = C + 8;  // a half warp's 8-byte stores (rows g < 4, columns 2q) in distinct banks
  static_assert(HEADS * OS * 4 <= 2 * P, "the staged sums fit the queries and the ring");
  static constexpr int BYTES = SCORES + (QREG ? HEADS * SP * 4 : 0);
};

// QREG false (MMA 2): warp (m-tile, kh) scores its 16 heads x keys 16 kh.. of a tile over all D
// dims, the queries' fragments read from shared memory each tile; the key halves' row maxima meet
// in shared memory and both warps take their keys' softmax. QREG true (MMA 3): warp (m-tile, kh)
// keeps its 16 heads' queries over dims kh * D / 2.. in registers (read from shared memory once)
// and scores all KT keys over that half; the kh 1 warps leave their scores in shared memory, the
// kh 0 warps add them and take the whole tile's softmax. Per tile MMA 3 reads half the fragment
// bytes from shared memory (its ldmatrix traffic binds MMA 2 near the HBM floor).
template <int HEADS, int C, int R, int Q_DT, int WARPS, int KT, bool QREG>
__device__ void mla_split_partial_wide(const void* q_latent, const void* q_rope, const void* kv_cache, const void* cache_len,
                                       const void* tree_mask, void* workspace, int n_tokens, int n_splits, int q_latent_row_stride,
                                       int q_rope_row_stride, int q_rope_head_stride, int mask_words, float softmax_scale) {
  using L = MlaWideSmem<HEADS, C, R, KT, QREG>;
  constexpr int D = L::D, DP = L::DP, PP = L::PP, SP = L::SP, ST = kMlaWideStages, THREADS = 32 * WARPS;
  constexpr int MT = HEADS / 16;  // m-tiles of heads
  constexpr int CW = C / WARPS;   // output columns a warp owns (P.V)
  constexpr int NP = CW / 16;     // their n-tile pairs (one ldmatrix.x4.trans each)
  constexpr int QK = QREG ? D / 32 : 1;  // k-steps of a depth half (MMA 3's query fragments)
  static_assert(HEADS % 16 == 0 && D % (QREG ? 32 : 16) == 0 && KT == 32 && WARPS == 2 * MT && C % (16 * WARPS) == 0,
                "MMA 2 / 3 shapes");
  const int split = blockIdx.x, t = blockIdx.y;
  if (t >= n_tokens || split >= n_splits) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int past = max(static_cast<const int*>(cache_len)[0], 0);
  const unsigned* mask = static_cast<const unsigned*>(tree_mask);
  unsigned short* qs = static_cast<unsigned short*>(dynamic_smem());
  unsigned short* ring = qs + L::TILES;
  unsigned short* ps = qs + L::P;
  float* row_max = reinterpret_cast<float*>(reinterpret_cast<char*>(qs) + L::F32);  // [2][HEADS]
  float* rescale = row_max + 2 * HEADS;                                              // [HEADS]
  float* row_sum = rescale + HEADS;                                                  // [2][HEADS]
  float* half_scores = reinterpret_cast<float*>(reinterpret_cast<char*>(qs) + L::SCORES);  // [HEADS][SP] (QREG)
  float* ws = static_cast<float*>(workspace);
  auto partial = [&](int h) { return ws + ((static_cast<i64>(t) * HEADS + h) * n_splits + split) * (C + 2); };

  // A split takes at least a tile: a short context leaves the later splits empty (m = -inf,
  // l = 0, their sums unwritten: the combine reads no sum of a weight-0 split).
  const int n_keys = mask == nullptr ? past + t + 1 : past + n_tokens;
  const int per = max((n_keys + n_splits - 1) / n_splits, KT);
  const int begin = min(split * per, n_keys), end = min(begin + per, n_keys);
  const int n_tiles = (end - begin + KT - 1) / KT;
  if (n_tiles == 0) {
    for (int h = threadIdx.x; h < HEADS; h += THREADS) {
      partial(h)[0] = neg_inf();
      partial(h)[1] = 0.f;
    }
    return;
  }

  auto stage = [&](int i) {  // tile i into ring slot i % ST; one group a call, empty past the last tile
    if (i < n_tiles) {
      const int base = begin + i * KT, nk = min(KT, end - base);
      mla_stage_tile_async<D, DP, KT, THREADS>(kv_cache, base, nk, mla_visible_keys(base, nk, past, t, mask, mask_words),
                                               ring + (i % ST) * KT * DP);
    }
    cp_async_commit();
  };
#pragma unroll 1
  for (int i = 0; i < ST - 1; ++i) stage(i);
  constexpr int QROWS = mla_query_rows_a_pass<HEADS, D, Q_DT, THREADS>();
#pragma unroll 1
  for (int h = 0; h < HEADS; h += QROWS)
    mla_stage_queries<C, R, Q_DT, THREADS, QROWS>(q_latent, q_rope, t, h, q_latent_row_stride, q_rope_row_stride, q_rope_head_stride,
                                                  qs + h * DP, nullptr);

  // Scores: warp (mt, kh) takes heads 16 mt.. (rows g, g + 8 of its m-tile): keys 16 kh.. over all
  // dims (MMA 2) or all keys over dims kh * D / 2.. (MMA 3). The rows' running max and sum are
  // kept by both key halves' warps (MMA 2: the same max, each its keys' share of the sum) or by the
  // kh 0 warps (MMA 3). Values: every warp all HEADS rows and its CW columns.
  const int mt = warp % MT, kh = warp / MT;
  float m_run[2] = {neg_inf(), neg_inf()}, l_run[2] = {0.f, 0.f}, o[MT][2 * NP][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 2 * NP; ++j) o[i][j][0] = o[i][j][1] = o[i][j][2] = o[i][j][3] = 0.f;
  // ldmatrix rows: lane l names row l % 8 (+ 8 for matrices 1, 3) at column 8 (l / 16) of an A
  // fragment's 16 x 16; of the scores' B (keys as rows) key l % 8 + 8 (l / 16), column 8 ((l / 8) % 2).
  const int a_row = lane % 8 + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);
  const unsigned short* q_frag = qs + (16 * mt + a_row) * DP + a_col;
  const int k_row = (QREG ? 0 : 16 * kh) + lane % 8 + 8 * (lane / 16), k_col = 8 * ((lane / 8) % 2) + (QREG ? kh * (D / 2) : 0);
  unsigned qf[QK][4];  // MMA 3: this warp's query fragments over its depth half
  if constexpr (QREG) {
    __syncthreads();  // the queries are staged
#pragma unroll
    for (int ks = 0; ks < QK; ++ks) ldsm_x4(qf[ks], q_frag + kh * (D / 2) + 16 * ks);
  }

  for (int i = 0; i < n_tiles; ++i) {
    cp_async_wait<ST - 2>();
    __syncthreads();  // tile i has landed; every warp is done with tile i - 1 (its slot, ps, rescale)
    stage(i + ST - 1);
    const int base = begin + i * KT, nk = min(KT, end - base);
    const unsigned visible = mla_visible_keys(base, nk, past, t, mask, mask_words);
    if (visible == 0u) continue;  // uniform: no head of this token sees a key of the tile
    const unsigned short* tile = ring + (i % ST) * KT * DP;
    const unsigned short* k_frag = tile + k_row * DP + k_col;

    // s[j][e]: row g + 8 (e / 2), key k0 + 8 j + 2 q + e % 2 (k0 = 16 kh for MMA 2, 0 for MMA 3) of
    // the n-tiles this warp holds; a hidden key's is -inf.
    constexpr int NS = QREG ? KT / 8 : 2;
    float s[NS][4], mx[2] = {neg_inf(), neg_inf()};
    bool softmax = true;  // whether this warp takes its rows' softmax of the tile
    if constexpr (QREG) {
      float cc[NS][4] = {};
#pragma unroll
      for (int ks = 0; ks < QK; ++ks) {
        unsigned b[4], b2[4];
        ldsm_x4(b, k_frag + 16 * ks);
        ldsm_x4(b2, k_frag + 16 * DP + 16 * ks);
        mma_bf16_16816(cc[0], qf[ks], b[0], b[1]);
        mma_bf16_16816(cc[1], qf[ks], b[2], b[3]);
        mma_bf16_16816(cc[2], qf[ks], b2[0], b2[1]);
        mma_bf16_16816(cc[3], qf[ks], b2[2], b2[3]);
      }
      float* half = half_scores + (16 * mt + g) * SP + 2 * q;
      if (kh == 1)
#pragma unroll
        for (int j = 0; j < NS; ++j) {
          *reinterpret_cast<float2*>(half + 8 * j) = make_float2(cc[j][0], cc[j][1]);
          *reinterpret_cast<float2*>(half + 8 * SP + 8 * j) = make_float2(cc[j][2], cc[j][3]);
        }
      __syncthreads();  // the second depth half's scores
      softmax = kh == 0;
      if (softmax)
#pragma unroll
        for (int j = 0; j < NS; ++j) {
          const float2 lo = *reinterpret_cast<const float2*>(half + 8 * j), hi = *reinterpret_cast<const float2*>(half + 8 * SP + 8 * j);
          s[j][0] = cc[j][0] + lo.x;
          s[j][1] = cc[j][1] + lo.y;
          s[j][2] = cc[j][2] + hi.x;
          s[j][3] = cc[j][3] + hi.y;
        }
    } else {
      // S[16 x 16] over the D dims: two key n-tiles, even / odd k-steps in separate chains.
      float cc[2][2][4] = {};
#pragma unroll 4
      for (int k0 = 0; k0 < D; k0 += 16) {
        unsigned a[4], b[4];
        ldsm_x4(a, q_frag + k0);
        ldsm_x4(b, k_frag + k0);
        const int chain = (k0 / 16) % 2;
        mma_bf16_16816(cc[chain][0], a, b[0], b[1]);
        mma_bf16_16816(cc[chain][1], a, b[2], b[3]);
      }
#pragma unroll
      for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = cc[0][j][e] + cc[1][j][e];
    }
    const int k0 = QREG ? 0 : 16 * kh;
    if (softmax) {
#pragma unroll
      for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = k0 + 8 * j + 2 * q + (e & 1);
          s[j][e] = ((visible >> key) & 1u) ? s[j][e] * softmax_scale : neg_inf();
          mx[e / 2] = fmaxf(mx[e / 2], s[j][e]);
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        if (!QREG && q == 0) row_max[kh * HEADS + 16 * mt + g + 8 * r] = mx[r];
      }
    }
    if constexpr (!QREG) __syncthreads();  // both key halves' maxima
    if (softmax) {
      float corr[2], sum[2] = {0.f, 0.f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = 16 * mt + g + 8 * r;
        const float m_tile = QREG ? mx[r] : fmaxf(row_max[row], row_max[HEADS + row]);
        const float m_new = fmaxf(m_run[r], m_tile);  // finite: the tile holds a visible key
        corr[r] = expf(m_run[r] - m_new);             // 0 while m = -inf
        m_run[r] = m_new;
      }
#pragma unroll
      for (int j = 0; j < NS; ++j) {
        float p[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[e] = expf(s[j][e] - m_run[e / 2]);  // 0 for a hidden key
          sum[e / 2] += p[e];
        }
        const int key = k0 + 8 * j + 2 * q;
        *reinterpret_cast<unsigned*>(ps + (16 * mt + g) * PP + key) = pack_bf16x2(p[0], p[1]);
        *reinterpret_cast<unsigned*>(ps + (16 * mt + g + 8) * PP + key) = pack_bf16x2(p[2], p[3]);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
        l_run[r] = l_run[r] * corr[r] + sum[r];
        if (kh == 0 && q == 0) rescale[16 * mt + g + 8 * r] = corr[r];
      }
    }
    __syncthreads();  // the tile's probabilities and every row's rescaling

    // o = o * rescale + P . V: P [HEADS x KT] bf16 as A, V = the tile's first C columns (keys as
    // rows: ldmatrix.trans gives the B fragments), this warp's CW of them.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const float c0 = rescale[16 * i + g], c1 = rescale[16 * i + g + 8];
#pragma unroll
      for (int j = 0; j < 2 * NP; ++j) {
        o[i][j][0] *= c0;
        o[i][j][1] *= c0;
        o[i][j][2] *= c1;
        o[i][j][3] *= c1;
      }
    }
#pragma unroll
    for (int ks = 0; ks < KT / 16; ++ks) {
      unsigned a[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) ldsm_x4(a[i], ps + (16 * i + a_row) * PP + 16 * ks + a_col);
      const unsigned short* v_frag = tile + (16 * ks + a_row) * DP + warp * CW + a_col;
#pragma unroll
      for (int np = 0; np < NP; ++np) {
        unsigned b[4];
        ldsm_x4_trans(b, v_frag + 16 * np);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma_bf16_16816(o[i][2 * np], a[i], b[0], b[1]);
          mma_bf16_16816(o[i][2 * np + 1], a[i], b[2], b[3]);
        }
      }
    }
  }

  // The partials: (m, l) of each head (l: both key halves' sums; MMA 3 the kh 0 warps'), then this
  // warp's columns. m goes to row_max, not rescale: a warp still in its last tile's P.V may read
  // rescale, while every warp read row_max before the last tile's final barrier.
  if (q == 0 && (!QREG || kh == 0))
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[kh * HEADS + 16 * mt + g + 8 * r] = l_run[r];
      if (kh == 0) row_max[16 * mt + g + 8 * r] = m_run[r];
    }
  __syncthreads();  // also: every warp is done with the queries and the ring, whose bytes stage o below
  for (int h = threadIdx.x; h < HEADS; h += THREADS) {
    partial(h)[0] = row_max[h];
    partial(h)[1] = QREG ? row_sum[h] : row_sum[h] + row_sum[HEADS + h];
  }
  // The sums leave through shared memory: a fragment's rows are 8 heads' 8-byte pieces (8 segments
  // a store, 64 stores a thread held a 1-token split's end on the LSU queue); the block's rows then
  // go out as whole 256-column runs, a warp's float2 stores contiguous.
  constexpr int OS = L::OS;  // the staged o rows' stride in floats
  float* os = reinterpret_cast<float*>(qs);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 2 * NP; ++j) {
      const int col = warp * CW + 8 * j + 2 * q;
      *reinterpret_cast<float2*>(os + (16 * i + g) * OS + col) = make_float2(o[i][j][0], o[i][j][1]);
      *reinterpret_cast<float2*>(os + (16 * i + g + 8) * OS + col) = make_float2(o[i][j][2], o[i][j][3]);
    }
  __syncthreads();
#pragma unroll 4
  for (int e = threadIdx.x; e < HEADS * (C / 2); e += THREADS) {
    const int h = e / (C / 2), c = 2 * (e - h * (C / 2));
    *reinterpret_cast<float2*>(partial(h) + 2 + c) = *reinterpret_cast<const float2*>(os + h * OS + c);
  }
}

template <int HEADS, int C, int R, int Q_DT, int KV_DT, int WARPS, int KT, int MMA>
__device__ void mla_split_partial(const void* q_latent, const void* q_rope, const void* kv_cache,
                                  const void* cache_len, const void* tree_mask, void* workspace,
                                  int n_tokens, int n_splits, int q_latent_row_stride, int q_rope_row_stride,
                                  int q_rope_head_stride, int mask_words, float softmax_scale) {
  static_assert(KT >= 1 && KT <= 32, "KT keys per tile: 1..32");
  if constexpr (MMA == 2 || MMA == 3) {
    static_assert(KV_DT == BF16, "MMA 2 and 3 read a bf16 cache");
    mla_split_partial_wide<HEADS, C, R, Q_DT, WARPS, KT, MMA == 3>(q_latent, q_rope, kv_cache, cache_len, tree_mask, workspace, n_tokens, n_splits,
                                                   q_latent_row_stride, q_rope_row_stride, q_rope_head_stride, mask_words, softmax_scale);
    return;
  } else if constexpr (MMA == 1) {
    static_assert(KV_DT == BF16, "MMA 1 reads a bf16 cache");
    mla_split_partial_mma<HEADS, C, R, Q_DT, WARPS, KT>(q_latent, q_rope, kv_cache, cache_len, tree_mask, workspace, n_tokens, n_splits,
                                                        q_latent_row_stride, q_rope_row_stride, q_rope_head_stride, mask_words,
                                                        softmax_scale);
    return;
  }
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
    const unsigned visible = mla_visible_keys(base, nk, past, t, mask, mask_words);
    stage_cache_tile<D, KV_DT, KT, 32 * WARPS>(kv_cache, base, nk, visible, tile);
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

// The log-sum-exp weights of token t's, head h's partials `w` (n_splits rows of C + 2 f32): per
// split exp(m_s - M) (0 for a split no key reached) into weight[s], and the returned 1 / sum_s
// exp(m_s - M) l_s (0 when no split saw a key), M the splits' max m. Every thread of the block
// calls it; it ends behind a barrier (weight[] written), and starts with one: its shared arrays
// may still be read by a previous call's users.
template <int THREADS>
__device__ __forceinline__ float mla_combine_weights(const float* w, int n_splits, int row, float* weight, float* weighted_l, float* m_part) {
  __syncthreads();
  // Each thread reads its splits' (m, l) at once (one round trip, not one a split), the block
  // takes their max, then one exp a split for the whole block.
  float m_mine = neg_inf();
  for (int s = threadIdx.x; s < n_splits; s += THREADS)
    if (w[s * row + 1] > 0.f) m_mine = fmaxf(m_mine, w[s * row]);
  m_mine = warp_max(m_mine);
  if (threadIdx.x % 32 == 0) m_part[threadIdx.x / 32] = m_mine;
  __syncthreads();
  float m_all = neg_inf();
#pragma unroll
  for (int i = 0; i < (THREADS + 31) / 32; ++i) m_all = fmaxf(m_all, m_part[i]);
  for (int s = threadIdx.x; s < n_splits; s += THREADS) {
    const float ls = w[s * row + 1];
    weight[s] = ls > 0.f ? expf(w[s * row] - m_all) : 0.f;
    weighted_l[s] = ls > 0.f ? ls * weight[s] : 0.f;
  }
  __syncthreads();
  float l_all = 0.f;
  for (int s = 0; s < n_splits; ++s) l_all += weighted_l[s];  // in split order (deterministic)
  return l_all > 0.f ? 1.f / l_all : 0.f;
}

template <int HEADS, int C, int O_DT, int THREADS, int CH>
__device__ void mla_split_combine(const void* workspace, void* out, int n_tokens, int n_splits, int out_row_stride) {
  static_assert(CH >= 1 && C % CH == 0, "CH column chunks divide C");
  constexpr int COLS = C / CH;                              // this block's columns
  constexpr int SG = COLS >= THREADS ? 1 : THREADS / COLS;  // split groups a column's sum is spread over
  __shared__ float weight[kMlaMaxSplits];  // exp(m_s - m_all), 0 for a split no key reached
  __shared__ float weighted_l[kMlaMaxSplits];
  __shared__ float m_part[(THREADS + 31) / 32];
  __shared__ float group_sum[SG > 1 ? SG * COLS : 1];
  const int h = blockIdx.x, t = blockIdx.y, c0 = blockIdx.z * COLS;
  if (t >= n_tokens) return;
  const float* w = static_cast<const float*>(workspace) + (static_cast<i64>(t) * HEADS + h) * n_splits * (C + 2);
  const float inv_l = mla_combine_weights<THREADS>(w, n_splits, C + 2, weight, weighted_l, m_part);
  const i64 o = static_cast<i64>(t) * out_row_stride + static_cast<i64>(h) * C + c0;
  // Group sg of SG sums splits sg, sg + SG, ... of its columns (SPAN a pass); with SG > 1 group 0
  // adds the groups' sums in order. A weight-0 split's sums may be unwritten (MMA 2, 3): never read.
  constexpr int SPAN = SG == 1 ? THREADS : COLS;
  [[maybe_unused]] constexpr int UNROLL = SG == 1 ? 16 : 8;  // (read by the pragma only: the host shim's compiler ignores it)
  const int sg = threadIdx.x / SPAN;
  for (int c = threadIdx.x % SPAN; c < COLS; c += SPAN) {
    float v = 0.f;
    if (sg < SG)
#pragma unroll UNROLL
      for (int s = sg; s < n_splits; s += SG)
        if (weight[s] != 0.f) v += w[s * (C + 2) + 2 + c0 + c] * weight[s];
    if constexpr (SG > 1) {  // one pass (COLS < THREADS): the barrier is uniform
      if (sg < SG) group_sum[sg * COLS + c] = v;
      __syncthreads();
      if (sg != 0) continue;
      v = 0.f;
#pragma unroll
      for (int g = 0; g < SG; ++g) v += group_sum[g * COLS + c];
    }
    store<O_DT>(out, o + c, v * inv_l);
  }
}

// mla_split_combine_uv: the combine and the value up-projection W_UV that reads its result, in one
// launch (compiler/passes/attention_uv.h; the IR's mla_attention then head_matmul):
//   lat[t, h, :] = the combine's out[t, h, :], rounded to L_DT as the combine stores it
//   y[t, h, n]   = sum_c lat[t, h, c] * W[h](n, c)        n < N, W[h] bf16 [N, C] row-major
// Block (h, n-chunk) takes head h's rows n0 .. n0 + RB of W for every token of the step: each warp
// loads its RB / WARPS rows into registers (lane l holds columns 8 l .. and every 256th after:
// C / 256 16-byte loads a row) BEFORE kp::grid_dependency_begin -- the weights are the plan's
// constants, so they stream while the partial still runs (the family waits itself) -- then per
// token the block merges the splits' columns into shared memory (as the combine, every column
// of the head) and each warp dots its rows with them (lanes' columns, then a warp sum).
// Why: the combine's launch wrote lat for W_UV's to read back, two latency-bound launches a layer
// in a decode step's chain (K2.6 on an H100, in the step's graph: ~3.7 + ~4 us a layer); here W_UV's
// 8 MiB load behind the partial. Measured slower all the same (7.6-8.0 us a layer: each block merges
// all C columns of its head, the combine's blocks C / 4; bench/RESULTS.md 2026-12-07 session 44), so
// the lowering takes it only with KPLAN_FUSE_ATTN_UV=1 (compiler/passes/attention_uv.cc).
// Template parameters: HEADS, C (the latent width, a multiple of 256), N (W_UV's rows a head),
// L_DT (the combine's stored dtype: lat is rounded to it), O_DT (y's), THREADS (whole warps), RB
// (rows a block: N % RB == 0, a multiple of the warps).
// Launch: grid (HEADS, N / RB), block THREADS. Arguments: workspace (as the combine's), w (bf16,
// head h's [N, C] at h * w_head_stride elements), y (O_DT, (t, h, n) at t * y_row_stride + h * N +
// n), n_tokens, n_splits, w_head_stride, y_row_stride.
template <int HEADS, int C, int N, int L_DT, int O_DT, int THREADS, int RB>
__device__ void mla_split_combine_uv(const void* workspace, const void* w, void* y, int n_tokens, int n_splits, int w_head_stride,
                                     int y_row_stride) {
  constexpr int WARPS = THREADS / 32, RW = RB / WARPS, CL = C / 256;  // rows a warp, 16-byte loads a lane and row
  static_assert(THREADS % 32 == 0 && C % 256 == 0 && N % RB == 0 && RB % WARPS == 0 && RW >= 1, "combine_uv shapes");
  __shared__ float weight[kMlaMaxSplits];
  __shared__ float weighted_l[kMlaMaxSplits];
  __shared__ float m_part[WARPS];
  __shared__ float4 lat4[C / 4];  // the token's merged latent (float4: 16-byte aligned for the lanes' reads)
  float* lat = reinterpret_cast<float*>(lat4);
  const int h = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.y * RB + warp * RW;
  uint4 wr[RW][CL];  // this warp's rows, this lane's columns 8 (lane + 32 j) ..
  const unsigned short* wh = static_cast<const unsigned short*>(w) + static_cast<i64>(h) * w_head_stride;
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int j = 0; j < CL; ++j) wr[r][j] = ldg_stream16(wh + static_cast<i64>(n0 + r) * C + 8 * (lane + 32 * j));
  grid_dependency_begin();
  for (int t = 0; t < n_tokens; ++t) {
    const float* ws = static_cast<const float*>(workspace) + (static_cast<i64>(t) * HEADS + h) * n_splits * (C + 2);
    const float inv_l = mla_combine_weights<THREADS>(ws, n_splits, C + 2, weight, weighted_l, m_part);
    for (int c = threadIdx.x; c < C; c += THREADS) {
      float v = 0.f;
#pragma unroll 8
      for (int s = 0; s < n_splits; ++s)
        if (weight[s] != 0.f) v += ws[s * (C + 2) + 2 + c] * weight[s];  // in split order, as the combine
      v *= inv_l;
      lat[c] = L_DT == F32 ? v : bf16_to_f32(f32_to_bf16(v));  // as the combine stores it
    }
    __syncthreads();
    float x[CL][8];
#pragma unroll
    for (int j = 0; j < CL; ++j) {
      const float4 a = *reinterpret_cast<const float4*>(lat + 8 * (lane + 32 * j));
      const float4 b = *reinterpret_cast<const float4*>(lat + 8 * (lane + 32 * j) + 4);
      x[j][0] = a.x, x[j][1] = a.y, x[j][2] = a.z, x[j][3] = a.w, x[j][4] = b.x, x[j][5] = b.y, x[j][6] = b.z, x[j][7] = b.w;
    }
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      float acc = 0.f;
#pragma unroll
      for (int j = 0; j < CL; ++j) {
        float wv[8];
        unpack8_bf16(wr[r][j], wv);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc += wv[e] * x[j][e];
      }
      acc = warp_sum(acc);
      if (lane == 0) store<O_DT>(y, static_cast<i64>(t) * y_row_stride + static_cast<i64>(h) * N + n0 + r, acc);
    }
  }
}

}  // namespace kp
