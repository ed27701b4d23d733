#pragma once
// Routed MoE experts (SwiGLU MLPs) grouped by expert: each expert the step's tokens chose is
// streamed from memory ONCE per step, however many of the step's (token, k) pairs chose it, and
// every row read is applied to all of those tokens. Three launches per MoE layer:
//
// moe_grouped_gate_up:  h[p, i] = silu(x[t] . Wg[e](i, :)) * (x[t] . Wu[e](i, :))
// moe_grouped_down:     partial[p, j] = topk_weights[p] * (h[p] . Wd[e](j, :))
// moe_combine:          out[t, j] = (ACC ? out[t, j] : 0) + sum_k partial[t * TOPK + k, j]  (k in order)
//   where p = t * TOPK + k is a (token, k) pair and e = clamp(topk_ids[p], 0, E - 1) its expert.
//
// Grouping. Block (x, slot) of the two expert kernels serves the slot-th distinct expert id
// among the step's clamped topk_ids (in increasing id order): every block ORs the ids into a
// shared bitmap of E bits (n_tokens * TOPK <= a few hundred int32, read from L2), warp 0 finds
// the slot-th set bit, and a block whose slot is past the number of distinct experts exits at
// once. grid.y = min(E, n_tokens * TOPK), so at most n_tokens * TOPK - distinct blocks per grid
// column are empty (none at 1 token). No compaction kernel, no atomics on global memory: results
// are deterministic, and the only difference from the CPU reference (runtime/cpu/moe.cc) is the
// f32 summation order of each dot product (the combine adds the k terms in the CPU's order).
// The block then takes the pairs that chose its expert NT at a time (warp 0 compacts them with
// a ballot, in increasing p) and, for each such chunk, stages the nt <= NT tokens' activations
// of the whole reduction dim in shared memory as f32 (dynamic shared memory: NT * 4 KiB per
// 1024 columns; 28 KiB a pair at K2.6's H = 7168), once, behind one barrier. Then every warp
// streams on its own, with no further block barrier: the block's row tiles x, x + grid.x, ...
// (ROWS rows per warp and tile; gate/up: ROWS gate rows and the same ROWS up rows), each row
// over the reduction dim in chunks of 1024 columns, each lane loading its 32 columns of every
// row of the warp's tile (INT4: one 16-byte load per row; bf16: four), with PF 1 the next
// (tile, chunk)'s loads issued before this one's math, across tile boundaries too. grid.x
// (BLOCKS blocks over the experts a step is expected to touch, families/moe_grouped.cc) keeps a
// block streaming several tiles, so its prologue (the bitmap of ids, the pair scan, the
// staging) is paid once per block, not once per tile. An expert's pair chunks are dealt over
// grid.z (block z takes chunks z, z + grid.z, ...), so the chunks of an expert many tokens chose
// stream side by side; a chunk past the first re-streams the tiles, mostly from L2.
// Why no repacked weight layout: the stacked checkpoint layout is already row-major per expert,
// so a warp's row chunk is one coalesced 512-byte (INT4) or 2 KiB (bf16) run and a block's
// tile is ROWS * WARPS contiguous rows; the synthetic-weight generator and the CPU reference
// read the same layout.
//
// INT4 dequantisation in registers without int->float conversions (I2F issues at 16 / clk / SM
// on sm_90, below what 2.8 TB/s of nibbles needs): nibble j (0..4) of a word w, masked in place
// and OR-ed into the mantissa of 2^23, is the float 2^23 + q * 2^(4j); one FMA by 2^-4j minus
// 2^(23-4j) + 8 gives q - 8 exactly (nibbles 5..7 likewise from w >> 16). Per weight: LOP3 + FFMA,
// then one FMA per token; each group's 32 products are summed then scaled once by its bf16 scale
// (as weight_dot.cuh's dot_int4 and the CPU's (q - 8) * scale agree up to summation order).
// Shared-memory bank conflicts: an INT4 lane reads 32 consecutive activations (128 B), so the
// staged float4s are XOR-swizzled by (lane & 7): a quarter warp's 16-byte reads hit 8 distinct
// bank groups.
// CUDA-core FMA, not tensor-core MMA: at 1..64 tokens per step over 384 experts an expert has
// ~1-2 tokens, so the kernels are bandwidth- and issue-bound, not FLOP-bound.
//
// Launch (families/moe_grouped.cc):
//   gate_up: grid (blocks per expert <= ceil(I / (ROWS * WARPS)), min(E, n_tokens * TOPK), pair
//            chunk blocks), block 32 * WARPS, dynamic shared memory NT * ceil(H / 1024) * 4 KiB.
//   down:    grid (blocks per expert <= ceil(H / (ROWS * WARPS)), min(E, n_tokens * TOPK), pair
//            chunk blocks), block 32 * WARPS, dynamic shared memory NT * ceil(I / 1024) * 4 KiB.
//   combine: grid (ceil(H / THREADS), n_tokens), block THREADS.
// Arguments:
//   gate_up: x (X_DT, row t at t * x_row_stride), topk_ids (int32 [n_tokens, TOPK]), w_gate,
//            w_gate_scale, w_up, w_up_scale, h (f32 [n_tokens * TOPK, I]), n_tokens, x_row_stride.
//   down:    h, topk_ids, topk_weights (f32 [n_tokens, TOPK]), w_down, w_down_scale,
//            partial (f32 [n_tokens * TOPK, H]), n_tokens.
//   combine: partial, out (Y_DT, row t at t * out_row_stride), n_tokens, out_row_stride.
// Expert weights are stacked per projection, experts contiguous:
//   W_FMT 0 (bf16):  Wg, Wu [E, I, H];  Wd [E, H, I]; the *_scale arguments are not read
//   W_FMT 1 (INT4, compressed-tensors pack-quantized, group 32, ir/support/int4.h):
//                    Wg, Wu int32 [E, I, H/8] with scales bf16 [E, I, H/32];
//                    Wd int32 [E, H, I/8] with scales bf16 [E, H, I/32]
//   bf16 rows whose length is not a multiple of 8 are read one element per lane (odd test shapes).
// Expert ids are clamped to [0, E) (graph warm-up safety).
//
// Template parameters: H (hidden), I (moe_intermediate_size), E (routed experts), TOPK, W_FMT
// (0 bf16, 1 INT4), X_DT / Y_DT activation element types, ACC (combine: add into out), and the
// tuning WARPS, ROWS (rows per warp), NT (pairs per chunk), PF (1: the next (tile, column
// chunk)'s weights are loaded before this one's math), BLOCKS (the grid's target size; read by
// the launch geometry only), THREADS (combine).
#include "common.cuh"

namespace kp {

constexpr int kMoeChunk = 1024;  // reduction columns per staged pass: 32 per lane

// The expert a block serves and the pairs that chose it, NT at a time.
template <int E, int TOPK, int NT>
struct MoeGroup {
  unsigned bits[(E + 31) / 32];
  int expert;
  int cursor;   // next pair to scan
  int count;    // pairs in `pairs`
  int pairs[NT];
};

// Finds the slot-th distinct clamped expert of ids[0, n_pairs) (g.expert = -1 when there are
// fewer); call from every thread of the block.
template <int E, int TOPK, int NT, int THREADS>
__device__ __forceinline__ void moe_find_group(MoeGroup<E, TOPK, NT>& g, const int* ids, int n_pairs, int slot) {
  constexpr int WORDS = (E + 31) / 32;
  for (int w = threadIdx.x; w < WORDS; w += THREADS) g.bits[w] = 0u;
  __syncthreads();
  for (int p = threadIdx.x; p < n_pairs; p += THREADS) {
    const int e = clamp_int(ids[p], 0, E - 1);
    atomicOr(&g.bits[e / 32], 1u << (e % 32));
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int base = 0, found = -1;
    for (int w0 = 0; w0 < WORDS; w0 += 32) {
      const unsigned word = w0 + lane < WORDS ? g.bits[w0 + lane] : 0u;
      const int c = __popc(word);
      int incl = c;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      const int excl = base + incl - c;
      if (slot >= excl && slot < excl + c) {
        unsigned rest = word;
        for (int r = slot - excl; r > 0; --r) rest &= rest - 1u;
        found = (w0 + lane) * 32 + __ffs(rest) - 1;
      }
      base += __shfl_sync(0xffffffffu, incl, 31);
    }
    const unsigned m = __ballot_sync(0xffffffffu, found >= 0);
    const int e = m ? __shfl_sync(0xffffffffu, found, __ffs(m) - 1) : -1;
    if (lane == 0) {
      g.expert = e;
      g.cursor = 0;
    }
  }
  __syncthreads();
}

// Warp 0 gathers the next up to NT pairs of g.expert (increasing p) into g.pairs / g.count.
template <int E, int TOPK, int NT, int THREADS>
__device__ __forceinline__ void moe_next_pairs(MoeGroup<E, TOPK, NT>& g, const int* ids, int n_pairs) {
  __syncthreads();  // the previous chunk's pairs are no longer read
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const int e = g.expert;
    int have = 0, cur = g.cursor;
    while (have < NT && cur < n_pairs) {
      const int p = cur + lane;
      const bool hit = p < n_pairs && clamp_int(ids[p], 0, E - 1) == e;
      const unsigned b = __ballot_sync(0xffffffffu, hit);
      const int before = __popc(b & ((1u << lane) - 1u));
      if (hit && have + before < NT) g.pairs[have + before] = p;
      const int hits = __popc(b);
      if (have + hits <= NT) {
        have += hits;
        cur += 32;
      } else {  // stop after the (NT - have)-th hit of this window
        unsigned rest = b;
        for (int r = NT - have - 1; r > 0; --r) rest &= rest - 1u;
        cur += __ffs(rest);
        have = NT;
      }
    }
    if (lane == 0) {
      g.count = have;
      g.cursor = cur < n_pairs ? cur : n_pairs;
    }
  }
  __syncthreads();
}

// Float4 slot of staged activation float4 f (INT4: XOR-swizzled, see the doc block).
template <int W_FMT>
__device__ __forceinline__ int moe_xs_slot(int f) {
  if constexpr (W_FMT == 1) return f ^ ((f >> 3) & 7);
  return f;
}

// Float4s per staged activation row: K rounded up to whole column chunks.
template <int K>
__device__ constexpr int moe_xs_row() {
  return (K + kMoeChunk - 1) / kMoeChunk * (kMoeChunk / 4);
}

// Stages all K columns of NTC activation rows (row r at element offset rows[r]) into xs
// [NTC][moe_xs_row<K>()] f32, chunk by chunk (each chunk's float4s swizzled as moe_xs_slot);
// columns past K are 0.
template <int K, int DT, int W_FMT, int NTC, int THREADS>
__device__ __forceinline__ void moe_stage(float4* xs, const void* x, const i64* rows) {
  constexpr int XS = moe_xs_row<K>();
  for (int idx = threadIdx.x; idx < NTC * XS; idx += THREADS) {
    const int r = idx / XS, f = idx % XS;
    const int chunk = f / (kMoeChunk / 4), fc = f % (kMoeChunk / 4);
    const int col = 4 * f;
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = col + u < K ? load<DT>(x, rows[r] + col + u) : 0.f;
    float4& dst = xs[r * XS + chunk * (kMoeChunk / 4) + moe_xs_slot<W_FMT>(fc)];
    dst.x = v[0];
    dst.y = v[1];
    dst.z = v[2];
    dst.w = v[3];
  }
}

// (q - 8) of nibble J (0..4) of w, exactly (see the doc block).
template <int J>
__device__ __forceinline__ float moe_nibble(unsigned w) {
  constexpr float kScale = 1.f / static_cast<float>(1u << (4 * J));
  constexpr float kBias = -(8388608.f * kScale + 8.f);
  return fmaf(__uint_as_float((w & (0xFu << (4 * J))) | 0x4B000000u), kScale, kBias);
}

// Row `row` (clamped to the matrix) of expert e's [rows, K] matrix and its scales.
template <int K, int W_FMT>
__device__ __forceinline__ const void* moe_row(const void* w, i64 row) {
  return W_FMT == 1 ? static_cast<const void*>(static_cast<const int*>(w) + row * (K / 8))
                    : static_cast<const void*>(static_cast<const unsigned short*>(w) + row * K);
}
template <int K, int W_FMT>
__device__ __forceinline__ const unsigned short* moe_row_scale(const void* s, i64 row) {
  return W_FMT == 1 ? static_cast<const unsigned short*>(s) + row * (K / 32) : nullptr;
}

// A warp's rows of one row tile: ROWS consecutive rows (clamped to the matrix) of each of MATS
// stacked matrices (gate/up: 2, down: 1); row r of the NR = MATS * ROWS is row r % ROWS of
// matrix r / ROWS. Moving to the next tile changes `first` only (no pointer arrays held twice).
template <int K, int W_FMT, int MATS, int ROWS>
struct MoeTileRows {
  static constexpr int NR = MATS * ROWS, K_DIM = K, FMT = W_FMT;
  const void* w[MATS];
  const unsigned short* s[MATS];
  i64 base;   // the expert's first row in the stack
  int first;  // the warp's first row of the tile, within the expert
  int rows;   // the expert's rows per matrix
  __device__ __forceinline__ i64 row(int r) const {
    const int i = first + r % ROWS;
    return base + (i < rows ? i : rows - 1);
  }
  __device__ __forceinline__ const void* ptr(int r) const { return moe_row<K, W_FMT>(w[r / ROWS], row(r)); }
  __device__ __forceinline__ const unsigned short* scale(int r) const { return moe_row_scale<K, W_FMT>(s[r / ROWS], row(r)); }
};

// This lane's 16-byte loads of columns [c0, c0 + kMoeChunk) of NR rows (INT4: one per row, its
// group's scale beside it; bf16: four per row; odd-length bf16 rows: none, read in the math).
// Issued before the chunk's activations are staged, so the loads' latency overlaps the staging.
template <int K, int W_FMT, int NR>
struct MoeChunkWeights {
  static constexpr int kLoads = W_FMT == 1 ? 1 : (K % 8 == 0 ? 4 : 0);
  uint4 q[kLoads > 0 ? kLoads : 1][NR];
  float sc[NR];
};

template <class Rows, int K, int W_FMT, int NR>
__device__ __forceinline__ void moe_chunk_load(const Rows& t, int c0, MoeChunkWeights<K, W_FMT, NR>& cw) {
  const int lane = threadIdx.x % 32;
  if constexpr (W_FMT == 1) {
    const int gi = c0 / 32 + lane;  // this lane's group of 32 columns
    if (gi >= K / 32) return;
#pragma unroll
    for (int r = 0; r < NR; ++r) cw.q[0][r] = __ldcs(static_cast<const uint4*>(t.ptr(r)) + gi);
#pragma unroll
    for (int r = 0; r < NR; ++r) cw.sc[r] = bf16_to_f32(__ldg(t.scale(r) + gi));
  } else if constexpr (K % 8 == 0) {
    // Load m covers columns c0 + (32 m + lane) * 8 + [0, 8).
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int col = c0 + (32 * m + lane) * 8;
#pragma unroll
      for (int r = 0; r < NR; ++r)
        cw.q[m][r] = col < K ? __ldcs(reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(t.ptr(r)) + col)) : uint4{0u, 0u, 0u, 0u};
    }
  }
}

// acc[r][t] += row r's columns [c0, c0 + kMoeChunk) . staged activation t, this lane's part.
// t.ptr(r): row r (INT4: int32 words; bf16: bf16), cw: this lane's loads of them (moe_chunk_load);
// xs: the staged rows (moe_stage), already offset to the chunk of c0.
template <int NTC, class Rows, int K, int W_FMT, int NR>
__device__ __forceinline__ void moe_chunk_dot(const Rows& t, const MoeChunkWeights<K, W_FMT, NR>& cw, int c0, const float4* xs,
                                              float (&acc)[NR][NTC]) {
  const int lane = threadIdx.x % 32;
  constexpr int F4 = moe_xs_row<K>();  // float4s between two tokens' staged rows
  if constexpr (W_FMT == 1) {
    const int gi = c0 / 32 + lane;
    if (gi >= K / 32) return;
    const uint4 (&q)[NR] = cw.q[0];
    const float (&sc)[NR] = cw.sc;
    float part[NR][NTC];
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int t = 0; t < NTC; ++t) part[r][t] = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float4 a[NTC], b[NTC];
#pragma unroll
      for (int t = 0; t < NTC; ++t) {
        a[t] = xs[t * F4 + moe_xs_slot<1>(lane * 8 + 2 * i)];
        b[t] = xs[t * F4 + moe_xs_slot<1>(lane * 8 + 2 * i + 1)];
      }
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const unsigned wd = i == 0 ? q[r].x : i == 1 ? q[r].y : i == 2 ? q[r].z : q[r].w;
        const unsigned hi = wd >> 16;
        const float v[8] = {moe_nibble<0>(wd), moe_nibble<1>(wd), moe_nibble<2>(wd), moe_nibble<3>(wd),
                            moe_nibble<4>(wd), moe_nibble<1>(hi), moe_nibble<2>(hi), moe_nibble<3>(hi)};
#pragma unroll
        for (int t = 0; t < NTC; ++t) {
          float p = part[r][t];
          p = fmaf(v[0], a[t].x, p);
          p = fmaf(v[1], a[t].y, p);
          p = fmaf(v[2], a[t].z, p);
          p = fmaf(v[3], a[t].w, p);
          p = fmaf(v[4], b[t].x, p);
          p = fmaf(v[5], b[t].y, p);
          p = fmaf(v[6], b[t].z, p);
          p = fmaf(v[7], b[t].w, p);
          part[r][t] = p;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int t = 0; t < NTC; ++t) acc[r][t] = fmaf(part[r][t], sc[r], acc[r][t]);
  } else if constexpr (K % 8 == 0) {
    const uint4 (&q)[4][NR] = cw.q;  // zero words past K
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      float4 a[NTC], b[NTC];
#pragma unroll
      for (int t = 0; t < NTC; ++t) {
        a[t] = xs[t * F4 + (32 * m + lane) * 2];
        b[t] = xs[t * F4 + (32 * m + lane) * 2 + 1];
      }
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const unsigned wd[4] = {q[m][r].x, q[m][r].y, q[m][r].z, q[m][r].w};
        float v[8];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          v[2 * u] = __uint_as_float(wd[u] << 16);
          v[2 * u + 1] = __uint_as_float(wd[u] & 0xffff0000u);
        }
#pragma unroll
        for (int t = 0; t < NTC; ++t) {
          float p = acc[r][t];
          p = fmaf(v[0], a[t].x, p);
          p = fmaf(v[1], a[t].y, p);
          p = fmaf(v[2], a[t].z, p);
          p = fmaf(v[3], a[t].w, p);
          p = fmaf(v[4], b[t].x, p);
          p = fmaf(v[5], b[t].y, p);
          p = fmaf(v[6], b[t].z, p);
          p = fmaf(v[7], b[t].w, p);
          acc[r][t] = p;
        }
      }
    }
  } else {
    // Odd row lengths: one element per lane per step (rows need not be 16-byte aligned).
    const float* xf = reinterpret_cast<const float*>(xs);
    for (int m = 0; m < kMoeChunk / 32; ++m) {
      const int col = c0 + 32 * m + lane;
      if (col >= K) break;
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const float v = bf16_to_f32(__ldcs(static_cast<const unsigned short*>(t.ptr(r)) + col));
#pragma unroll
        for (int t = 0; t < NTC; ++t) acc[r][t] = fmaf(v, xf[t * 4 * F4 + 32 * m + lane], acc[r][t]);
      }
    }
  }
}

// The row tiles blockIdx.x, blockIdx.x + gridDim.x, ... (< n_tiles; TILE rows each) of one pair
// chunk through this warp's rows t (t.first: its first row of tile 0), against the NTC
// activation rows staged in xs (no block barrier inside: each warp streams on its own).
// emit(tile, acc) gets acc[r][j] = row r . activation row j (full sums, in every lane).
// PF 1: the next (tile, column chunk)'s loads are issued before this one's math, across tile
// boundaries too (two steps in flight per lane, more registers); PF 0: load, then math.
template <int NTC, int PF, int TILE, class Rows, class Emit>
__device__ __forceinline__ void moe_stream_tiles(int n_tiles, const float4* xs, Rows t, Emit emit) {
  constexpr int K = Rows::K_DIM, W_FMT = Rows::FMT, NR = Rows::NR;
  constexpr int KC = (K + kMoeChunk - 1) / kMoeChunk;  // column chunks per row
  int tile = blockIdx.x;
  if (tile >= n_tiles) return;
  const int first0 = t.first;
  t.first = first0 + tile * TILE;
  MoeChunkWeights<K, W_FMT, NR> cw;
  if constexpr (PF == 1) moe_chunk_load(t, 0, cw);
  for (;;) {
    float acc[NR][NTC];
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int j = 0; j < NTC; ++j) acc[r][j] = 0.f;
    const int next_tile = tile + static_cast<int>(gridDim.x);
    Rows nt = t;
    nt.first = first0 + next_tile * TILE;
    for (int c = 0; c < KC; ++c) {
      MoeChunkWeights<K, W_FMT, NR> next;
      if constexpr (PF == 1) {
        if (c + 1 < KC) {
          moe_chunk_load(t, (c + 1) * kMoeChunk, next);
        } else if (next_tile < n_tiles) {
          moe_chunk_load(nt, 0, next);
        }
      } else {
        moe_chunk_load(t, c * kMoeChunk, cw);
      }
      moe_chunk_dot<NTC>(t, cw, c * kMoeChunk, xs + c * (kMoeChunk / 4), acc);
      if constexpr (PF == 1) cw = next;
    }
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int j = 0; j < NTC; ++j) acc[r][j] = warp_sum(acc[r][j]);
    emit(tile, acc);
    if (next_tile >= n_tiles) return;
    tile = next_tile;
    t.first = nt.first;
  }
}

// Stages the chunk's activation rows (row r at element offset rows[r], written by threads < NTC
// before the call) once, for every row tile of the block.
template <int K, int DT, int W_FMT, int NTC, int THREADS>
__device__ __forceinline__ void moe_stage_pairs(float4* xs, const void* x, const i64* rows) {
  __syncthreads();  // rows[] written; the previous chunk's activations are no longer read
  moe_stage<K, DT, W_FMT, NTC, THREADS>(xs, x, rows);
  __syncthreads();
}

template <int H, int I, int E, int TOPK, int W_FMT, int X_DT, int WARPS, int ROWS, int NT, int PF, int NTC>
__device__ __forceinline__ void moe_gate_up_chunk(const MoeGroup<E, TOPK, NT>& g, const void* x, const void* w_gate,
                                                  const void* w_gate_scale, const void* w_up, const void* w_up_scale, void* h,
                                                  int x_row_stride, float4* xs, i64* rows) {
  constexpr int NR = 2 * ROWS;  // ROWS gate rows, then the same ROWS up rows
  constexpr int TILE = WARPS * ROWS;
  if (threadIdx.x < NTC) rows[threadIdx.x] = static_cast<i64>(g.pairs[threadIdx.x] / TOPK) * x_row_stride;
  moe_stage_pairs<H, X_DT, W_FMT, NTC, WARPS * 32>(xs, x, rows);
  const int warp = threadIdx.x / 32;
  MoeTileRows<H, W_FMT, 2, ROWS> t{{w_gate, w_up},
                                   {static_cast<const unsigned short*>(w_gate_scale), static_cast<const unsigned short*>(w_up_scale)},
                                   static_cast<i64>(g.expert) * I, warp * ROWS, I};
  auto emit = [&](int tile, const float (&acc)[NR][NTC]) {
    const int i0 = tile * TILE + warp * ROWS;
    if (threadIdx.x % 32 != 0) return;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (i0 + r >= I) break;
#pragma unroll
      for (int j = 0; j < NTC; ++j) static_cast<float*>(h)[static_cast<i64>(g.pairs[j]) * I + i0 + r] = silu(acc[r][j]) * acc[ROWS + r][j];
    }
  };
  moe_stream_tiles<NTC, PF, TILE>((I + TILE - 1) / TILE, xs, t, emit);
}

template <int H, int I, int E, int TOPK, int W_FMT, int X_DT, int WARPS, int ROWS, int NT, int PF, int BLOCKS>
__device__ void moe_grouped_gate_up(const void* x, const void* topk_ids, const void* w_gate, const void* w_gate_scale,
                                    const void* w_up, const void* w_up_scale, void* h, int n_tokens, int x_row_stride) {
  static_assert(NT >= 1 && NT <= 8, "NT pairs per chunk: 1..8");
  static_assert(W_FMT == 0 || H % 32 == 0, "INT4 rows hold whole groups of 32");
  __shared__ MoeGroup<E, TOPK, NT> g;
  __shared__ i64 rows[NT];
  float4* xs = static_cast<float4*>(dynamic_smem());  // NT staged rows of H (the launch's smem_bytes)
  const int* ids = static_cast<const int*>(topk_ids);
  const int n_pairs = n_tokens * TOPK;
  moe_find_group<E, TOPK, NT, WARPS * 32>(g, ids, n_pairs, blockIdx.y);
  if (g.expert < 0) return;
  for (int chunk = 0;; ++chunk) {
    moe_next_pairs<E, TOPK, NT, WARPS * 32>(g, ids, n_pairs);
    const int nt = g.count;
    if (nt == 0) return;
    if (chunk % static_cast<int>(gridDim.z) != static_cast<int>(blockIdx.z)) continue;  // another block's pair chunk
#define KP_MOE_GU(N) \
  if (nt == N) moe_gate_up_chunk<H, I, E, TOPK, W_FMT, X_DT, WARPS, ROWS, NT, PF, N>(g, x, w_gate, w_gate_scale, w_up, w_up_scale, h, x_row_stride, xs, rows);
    KP_MOE_GU(1)
    if constexpr (NT >= 2) { KP_MOE_GU(2) }
    if constexpr (NT >= 3) { KP_MOE_GU(3) }
    if constexpr (NT >= 4) { KP_MOE_GU(4) }
    if constexpr (NT >= 5) { KP_MOE_GU(5) }
    if constexpr (NT >= 6) { KP_MOE_GU(6) }
    if constexpr (NT >= 7) { KP_MOE_GU(7) }
    if constexpr (NT >= 8) { KP_MOE_GU(8) }
#undef KP_MOE_GU
  }
}

template <int H, int I, int E, int TOPK, int W_FMT, int WARPS, int ROWS, int NT, int PF, int NTC>
__device__ __forceinline__ void moe_down_chunk(const MoeGroup<E, TOPK, NT>& g, const void* h, const void* topk_weights,
                                               const void* w_down, const void* w_down_scale, void* partial, float4* xs, i64* rows) {
  constexpr int TILE = WARPS * ROWS;
  if (threadIdx.x < NTC) rows[threadIdx.x] = static_cast<i64>(g.pairs[threadIdx.x]) * I;
  moe_stage_pairs<I, F32, W_FMT, NTC, WARPS * 32>(xs, h, rows);
  const int warp = threadIdx.x / 32;
  MoeTileRows<I, W_FMT, 1, ROWS> t{{w_down}, {static_cast<const unsigned short*>(w_down_scale)}, static_cast<i64>(g.expert) * H, warp * ROWS, H};
  auto emit = [&](int tile, const float (&acc)[ROWS][NTC]) {
    const int j0 = tile * TILE + warp * ROWS;
    if (threadIdx.x % 32 != 0) return;
#pragma unroll
    for (int t = 0; t < NTC; ++t) {
      const int p = g.pairs[t];
      const float wt = static_cast<const float*>(topk_weights)[p];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        if (j0 + r < H) static_cast<float*>(partial)[static_cast<i64>(p) * H + j0 + r] = wt * acc[r][t];
      }
    }
  };
  moe_stream_tiles<NTC, PF, TILE>((H + TILE - 1) / TILE, xs, t, emit);
}

template <int H, int I, int E, int TOPK, int W_FMT, int WARPS, int ROWS, int NT, int PF, int BLOCKS>
__device__ void moe_grouped_down(const void* h, const void* topk_ids, const void* topk_weights, const void* w_down,
                                 const void* w_down_scale, void* partial, int n_tokens) {
  static_assert(NT >= 1 && NT <= 8, "NT pairs per chunk: 1..8");
  static_assert(W_FMT == 0 || I % 32 == 0, "INT4 rows hold whole groups of 32");
  __shared__ MoeGroup<E, TOPK, NT> g;
  __shared__ i64 rows[NT];
  float4* xs = static_cast<float4*>(dynamic_smem());  // NT staged rows of I (the launch's smem_bytes)
  const int* ids = static_cast<const int*>(topk_ids);
  const int n_pairs = n_tokens * TOPK;
  moe_find_group<E, TOPK, NT, WARPS * 32>(g, ids, n_pairs, blockIdx.y);
  if (g.expert < 0) return;
  for (int chunk = 0;; ++chunk) {
    moe_next_pairs<E, TOPK, NT, WARPS * 32>(g, ids, n_pairs);
    const int nt = g.count;
    if (nt == 0) return;
    if (chunk % static_cast<int>(gridDim.z) != static_cast<int>(blockIdx.z)) continue;  // another block's pair chunk
#define KP_MOE_DN(N) \
  if (nt == N) moe_down_chunk<H, I, E, TOPK, W_FMT, WARPS, ROWS, NT, PF, N>(g, h, topk_weights, w_down, w_down_scale, partial, xs, rows);
    KP_MOE_DN(1)
    if constexpr (NT >= 2) { KP_MOE_DN(2) }
    if constexpr (NT >= 3) { KP_MOE_DN(3) }
    if constexpr (NT >= 4) { KP_MOE_DN(4) }
    if constexpr (NT >= 5) { KP_MOE_DN(5) }
    if constexpr (NT >= 6) { KP_MOE_DN(6) }
    if constexpr (NT >= 7) { KP_MOE_DN(7) }
    if constexpr (NT >= 8) { KP_MOE_DN(8) }
#undef KP_MOE_DN
  }
}

template <int H, int TOPK, int Y_DT, int ACC, int THREADS>
__device__ void moe_combine(const void* partial, void* out, int n_tokens, int out_row_stride) {
  const int j = blockIdx.x * THREADS + threadIdx.x;
  const int t = blockIdx.y;
  if (j >= H || t >= n_tokens) return;
  const float* p = static_cast<const float*>(partial) + static_cast<i64>(t) * TOPK * H + j;
  float total = 0.f;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) total += p[static_cast<i64>(k) * H];
  const i64 o = static_cast<i64>(t) * out_row_stride + j;
  store<Y_DT>(out, o, ACC ? load<Y_DT>(out, o) + total : total);
}

}  // namespace kp
