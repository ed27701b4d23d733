#pragma once
// Routed MoE experts (SwiGLU MLPs) grouped by expert: each expert the step's tokens chose is
// streamed from memory ONCE per step, however many of the step's (token, k) pairs chose it, and
// every row read is applied to all of those tokens. Three launches per MoE layer:
//
// moe_grouped_gate_up:  h[p, i] = silu(x[t] . Wg[e](i, :)) * (x[t] . Wu[e](i, :))
// moe_grouped_down:     partial[p, j] = topk_weights[p] * (h[p] . Wd[e](j, :))
// moe_combine:          out[t, j] = (ACC ? residual[t, j] : 0) + sum_k partial[t * TOPK + k, j]  (k in order)
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
// row of the warp's tile (INT4: one 16-byte load per row; bf16: four), with PF > 0 the next PF
// (tile, chunk)s' loads issued before this one's math, across tile boundaries too (a ring of
// PF + 1 register slots, moe_ring_stream: the bytes a warp keeps in flight bind this stream). grid.x
// (BLOCKS blocks over the experts a step is expected to touch, families/moe_grouped.cc) keeps a
// block streaming several tiles, so its prologue (the bitmap of ids, the pair scan, the
// staging) is paid once per block, not once per tile. An expert's pair chunks are dealt over
// grid.z (block z takes chunks z, z + grid.z, ...), so the chunks of an expert many tokens chose
// stream side by side; a chunk past the first re-streams the tiles, mostly from L2.
// Weight layout: the stacked checkpoint rows (a warp's row chunk is one coalesced 512-byte INT4
// or 2 KiB bf16 run), except on the tensor-core path with W_LAYOUT 1, where the INT4 experts are
// in ir/support/int4_frag.h's order (below).
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
// MMA 0 (CUDA cores) spends ~2 instructions a weight dequantising plus an FMA a weight per
// token, and registers cap a pair chunk at NT 2-3, so an expert chosen by 4+ pairs is streamed
// several times: issue-bound (44% of 4.3 TB/s at 1 token on an H200, 20% at 8).
// MMA 1 and 2 (INT4; the tensor cores, mma.sync m16n8k16 bf16 -> f32, sm_80+: sm_90 and sm_120;
// they differ in the scales only: MMA 1 loads 4 groups' a lane and shares them over the quad by
// shuffles, MMA 2 loads each lane's rows' own, more registers and fewer instructions):
//   - Weight rows are the MMA's M (an m-tile: 8 gate + the same 8 up rows, so a lane's D holds
//     both SwiGLU halves of its row; down: 16 rows), the chunk's pairs its N (an n-tile of 8;
//     NT up to 16, two n-tiles): at <= 8 pairs half the MMAs of pairs-as-M, whose M of 16 would
//     be mostly padding (at full bandwidth, hi + lo, pairs-as-M needs ~0.5 MMA / clk / SM, past
//     what mma.sync issues on sm_90). Columns past nt read the last pair's row and are dropped; an
//     n-tile holding none of the chunk's pairs is skipped (moe_ntile_live).
//   - Activations are staged once per chunk already split into bf16 hi + lo = x - hi (two MMAs:
//     products with the bf16 weights exact, x kept to ~2^-17 of itself, so results stay within
//     f32 summation-order error of the CPU op), in B-fragment order: the same NT x K x 4 bytes,
//     no conversion in the loop. XB 1 (a bf16-activations plan's): hi only, x rounded to bf16 as
//     such a plan stores activations: one MMA a k-step, NT x K x 2 bytes (twice the pairs fit).
//   - A k-step's 16 k must lie in ONE group so D can be scaled per (row, group): each group's two
//     k-steps go into a temp fragment (the first MMA's C is the constant 0: no zeroing moves),
//     then acc += scale * temp. The k order inside a
//     group is free as long as A and B agree: lane (g, q) takes word q of the group (columns
//     8q .. 8q + 8), k-step 0 its nibbles {0, 4}, {1, 5}, k-step 1 {2, 6}, {3, 7}.
//   - The checkpoint layout's 16 bytes are one whole group of one row, but the fragment wants
//     word q of it in lane q of the row's quad: lanes load 16 bytes each (a quad: 64 contiguous
//     bytes of a row), store them to a per-warp 1 KiB buffer and read them back with ldmatrix.x4
//     (XOR-swizzled: both conflict-free): 2 instructions per 16-byte load, against ~16 for a
//     4x4 word transpose by shuffles.
//   - W_LAYOUT 1: the experts are stored in that transposed order
//     (ir/support/int4_frag.h: an octet of 8 rows x 128 columns is 512 contiguous bytes, lane
//     4g + q's 16 of them word q of the sub-block's 4 groups of row g, the octet's 4 scales a row
//     beside them), so each 16-byte load is the lane's fragment words: no buffer, no store /
//     ldmatrix, a step two or four 512-byte runs. The GPU runtime lays a plan's weights out so at
//     load (runtime/gpu/device_layout.h); the results are bit for bit W_LAYOUT 0's.
//   - Dequantisation: a nibble OR-ed into bf16 128's mantissa is 128 + q, one bf16x2 FMA makes
//     it q - 8 exactly (~1.4 instructions a weight, no I2F; the mask-and-OR is one lop3 written
//     in PTX: from C++ ptxas emitted two, 15 instructions a word instead of 11).
//   - MMA 3 and 4 (MMA 2 and 1 with the dequantisation's subtraction moved into the MMA): the
//     A words stay 128 + q (no HFMA2: ~0.9 instructions a weight) and each group's first MMA
//     starts from C = -136 x the group's staged activation sum, staged once per chunk beside the
//     words as the C fragment itself (a float4 per quad lane and n-tile: one LDS.128 a group).
//     The sum cancels inside the MMA's f32 accumulation, so results sit ~5-10x further from the
//     CPU op (~7e-6 on the host against ~1e-6) than with q - 8. sm_90 SASS: gate/up (MMA 3)
//     908 against 1026 instructions a 2-step loop iteration, down (MMA 4) 2167 against 2585 a
//     tile, registers unchanged (MMA 3's down takes 182: MMA 4 is down's form).
//   - Rows of whole tiles and whole steps (K2.6's) load without bounds checks: clamped rows are
//     in the matrix anyway, and the rows past it are dropped by the emit.
//   - A step is 256 (MT 1) or 128 (MT 2) columns of the warp's rows; PF > 0 issues the next PF
//     steps' loads (across tiles too) before this one's math, as MMA 0 does per 1024 columns.
//   - RING >= 2 (one m-tile a warp, rows of whole 256-column steps, PF 0): the steps in flight
//     live in shared memory, not registers. Each warp has RING stages of 2304 bytes (the step's
//     16 rows x 8 groups, 2 KiB, and their 16 x 8 bf16 scales); cp.async copies a step's 16-byte
//     pieces from global straight into the slots ldmatrix reads (the transposition buffer's
//     swizzled order: no STS, no registers held), RING - 1 steps ahead of the math
//     (moe_smem_ring_stream; one commit group a step, wait_group RING - 1, __syncwarp). The
//     profile of the PF 1 register ring (bench/RESULTS.md 2026-12-05) had gate/up at 48% of
//     DRAM bandwidth, a quarter of its stall samples on the STS waiting for the ring's loads:
//     one step ahead does not cover the latency, and deeper register rings spill. With W_LAYOUT 1
//     a stage holds the lanes' fragment words as loaded (each lane reads back its own 64 bytes)
//     and the rows' scale runs: the register ring's loads share one SASS scoreboard, so its
//     first use of a step waits for every load in flight (moe_frag_ring_issue); a ring's
//     wait_group does not.
//   - TMA 1 (RING >= 2, W_LAYOUT 1, whole row tiles; sm_90 and later): the ring's copies by the
//     copy engine. A step of an int4_frag tile is four contiguous runs (each octet's two
//     sub-blocks of words, 1 KiB, and of scales, 128 bytes), so lane 0 starts them as four
//     cp.async.bulk copies onto the stage's mbarrier and the warp waits for the barrier's phase
//     (moe_bulk_ring_stream): RING steps in flight a warp, no per-lane copy instructions, no
//     registers. Tried because the 1-token experts stream at ~2.6 TB/s on the H100 and the H200
//     alike whatever the register or cp.async ring (bench/RESULTS.md, session 39); on the H100 it
//     does not move the 1-token step (session 40: 1.5503 against 1.5478 ms), so it is opt-in.
//
// Launch (families/moe_grouped.cc):
//   gate_up: grid (blocks per expert <= ceil(I / (ROWS * WARPS)), min(E, n_tokens * TOPK), pair
//            chunk blocks), block 32 * WARPS, dynamic shared memory NT * ceil(H / 1024) * 4 KiB.
//   down:    grid (blocks per expert <= ceil(H / (ROWS * WARPS)), min(E, n_tokens * TOPK), pair
//            chunk blocks), block 32 * WARPS, dynamic shared memory NT * ceil(I / 1024) * 4 KiB.
//   MMA 1..4 add WARPS * 2 KiB of static shared memory (the transposition buffers; W_LAYOUT 1:
//   none; RING >= 2: none, but WARPS * RING * 2304 bytes of dynamic shared memory after the
//   rest, and TMA 1 WARPS * RING 8-byte barriers after those); MMA 3, 4 add K / 32 * ceil(NT / 8) * 64 bytes of dynamic shared memory (the C
//   fragments); XB 1 halves the staged rows (2 KiB a pair per 1024 columns).
//   combine: grid (ceil(H / THREADS), n_tokens), block THREADS.
// Arguments:
//   gate_up: x (X_DT, row t at t * x_row_stride), topk_ids (int32 [n_tokens, TOPK]; ROUTE > 0:
//            written), w_gate, w_gate_scale, w_up, w_up_scale, h (f32 [n_tokens * TOPK, I]),
//            n_tokens, x_row_stride, and for ROUTE > 0 (unread otherwise) the router's logits
//            (f32 [n_tokens, E]; topk_ids itself: the step is routed already, the ids are read),
//            bias (f32 [E]), topk_weights (f32 [n_tokens, TOPK], written) and routed_scaling.
//   down:    h, topk_ids, topk_weights (f32 [n_tokens, TOPK]), w_down, w_down_scale,
//            partial (f32 [n_tokens * TOPK, H]), n_tokens.
//   combine: partial, out (Y_DT, row t at t * out_row_stride), residual (Y_DT in out's layout,
//            read by ACC 1, may be out), n_tokens, out_row_stride.
// Expert weights are stacked per projection, experts contiguous:
//   W_FMT 0 (bf16):  Wg, Wu [E, I, H];  Wd [E, H, I]; the *_scale arguments are not read
//   W_FMT 1 (INT4, compressed-tensors pack-quantized, group 32, ir/support/int4.h):
//                    Wg, Wu int32 [E, I, H/8] with scales bf16 [E, I, H/32];
//                    Wd int32 [E, H, I/8] with scales bf16 [E, H, I/32]
//   bf16 rows whose length is not a multiple of 8 are read one element per lane (odd test shapes).
// Expert ids are clamped to [0, E) (graph warm-up safety).
//
// Template parameters: H (hidden), I (moe_intermediate_size), E (routed experts), TOPK, W_FMT
// (0 bf16, 1 INT4), X_DT / Y_DT activation element types, ACC (combine: add residual), and the
// tuning WARPS, ROWS (rows per warp; MMA 1, 2: gate/up 8 or 16, down 16 or 32), NT (pairs per
// chunk: 1..8; MMA 1, 2: 1..16), PF (0..3: the next PF (tile, column chunk)s' weights are loaded
// before this one's math), BLOCKS (the grid's target size; read by the launch geometry only), MMA
// (0 CUDA cores; 1, 2 tensor cores, INT4 only: the group scales shared by shuffles / each lane's
// own; 3, 4: 2, 1 with weights as 128 + q and the bias in C), RING (0: the PF register ring;
// 2..8: shared-memory stages a warp, cp.async), THREADS (combine); gate/up's ROUTE (0: the step's
// topk_ids are read; 1..64: up to that many tokens routed by the launch itself, the router's
// launch folded in: every block runs moe_router.cuh's ungrouped routing of the step's tokens, a
// warp a token, into shared memory before it finds its expert, and block (0, 0, 0) writes
// topk_ids / topk_weights for down) and RNORM (the router's norm_topk_prob, ROUTE > 0); last,
// W_LAYOUT (gate/up and down: 0 the checkpoint's rows, 1 int4_frag order; the weights' layout,
// which the plan records on them, not a tuning choice), then XB (MMA 1..4: 0 the activations
// staged as bf16 hi + lo, two MMAs a k-step, results within f32 summation order of the CPU op;
// 1 rounded to bf16 once staged, as a bf16-activations plan stores its activations: one MMA a
// k-step, half the staged bytes, so twice the pairs a chunk fit shared memory), then TMA (0: a
// RING's copies by cp.async, 1: by the copy engine), then gate/up's KS (0 or 1: none; 2, 4: with
// TMA 1, a tile's rows are WARPS / KS warps', each row's K split into KS parts streamed by KS
// warps side by side and added in part order before the SwiGLU, so a 1-token step's few tiles
// take more warps of fewer steps each), then GPF (gate/up and down, W_LAYOUT 1: KiB of each warp's
// first tile that the entry's prologue asks L2 for before the PDL wait, from the ids or logits as
// they stand -- moe_grouped_gate_up_prefetch; 0: none). MINB is no template argument: the entry's
// __launch_bounds__ minimum of resident blocks an SM (0: none), so ptxas keeps a thread's
// registers to 64K / (32 WARPS MINB) -- more warps an SM than the registers of PF's ring allow.
#include "common.cuh"
#include "int4_frag.h"     // W_LAYOUT 1's offsets
#include "moe_router.cuh"  // moe_route_token (ROUTE)

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
    // Every lane has read g.cursor (above) before lane 0 moves it: with no window to scan the
    // loop holds no ballot that would order them (compute-sanitizer racecheck's WAR warning).
    __syncwarp();
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

// W_LAYOUT 1 (ir/support/int4_frag.h): sub-block `sub` of the octet holding `row`, 512 bytes as
// the 32 lanes' fragment words (lane l's at + l), and its 8 rows' 4 scales (row g's at + g).
template <int K>
__device__ __forceinline__ const uint4* moe_frag_words(const void* w, i64 row, int sub) {
  return static_cast<const uint4*>(w) + kplan::int4_frag::sub_block_words(row, sub, K) / 4;
}
template <int K>
__device__ __forceinline__ const uint2* moe_frag_scales(const void* s, i64 row, int sub) {
  return reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(s) + kplan::int4_frag::sub_block_scales(row, sub, K));
}

// A warp's rows of one row tile: ROWS consecutive rows (clamped to the matrix) of each of MATS
// stacked matrices (gate/up: 2, down: 1); row r of the NR = MATS * ROWS is row r % ROWS of
// matrix r / ROWS. Moving to the next tile changes `first` only (no pointer arrays held twice).
// WHOLE: the matrices' rows are whole tiles, so every row a warp streams is valid (no checks).
// LAYOUT: the INT4 matrices' device layout (W_LAYOUT: 0 the checkpoint's, 1 ir/support/int4_frag.h).
template <int K, int W_FMT, int MATS, int ROWS, bool WHOLE = false, int LAYOUT = 0>
struct MoeTileRows {
  static constexpr int NR = MATS * ROWS, K_DIM = K, FMT = W_FMT, N_MATS = MATS, WARP_ROWS = ROWS, W_LAYOUT = LAYOUT;
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
  __device__ __forceinline__ bool valid(int r) const { return WHOLE || first + r % ROWS < rows; }
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

// The row tiles blockIdx.x, blockIdx.x + gridDim.x, ... (< n_tiles) of STEPS load steps each,
// taken as one sequence of steps with PF steps' loads in flight ahead of the math, across tile
// boundaries too: a ring of PF + 1 load slots in registers, indexed at compile time (the step
// loop is unrolled by PF + 1). PF 0: load, then math. load(slot, tile, step) issues a step's
// loads, math(slot, tile, step) consumes them, emit(tile) follows a tile's last step.
// Whole rings unrolled per tile (below) on sm_90, and in the host tests; sm_120's ptxas took 107 s
// and 255 registers with spills for K2.6's down that way, so it keeps the runtime-step ring.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900) || defined(KP_HOST_SHIM)
constexpr bool kMoeUnrolledRings = true;
#else
constexpr bool kMoeUnrolledRings = false;
#endif

template <int PF, int STEPS, class Loads, class Load, class Math, class Emit>
__device__ __forceinline__ void moe_ring_stream(int n_tiles, Load load, Math math, Emit emit) {
  const int first = blockIdx.x, stride = gridDim.x;
  if (first >= n_tiles) return;
  Loads ring[PF + 1];
  if constexpr (kMoeUnrolledRings && PF > 0 && STEPS % (PF + 1) == 0 && STEPS <= 8) {
    // Whole rings per tile: the tile's steps unrolled, so step numbers (addresses, column
    // groups) are constants, and the slot of step c is c % (PF + 1) in every tile (ptxas holds
    // K2.6's down at 105 registers this way, 136 with runtime steps: 2 blocks an SM, not 1).
    // Only for short rows: gate/up's 28 steps unrolled (a 197 KiB cubin) took 160 us against
    // 115 for the K2.6 slice's two layers at 1 token (bench/RESULTS.md 2026-12-04 19:53-20:50).
#pragma unroll
    for (int u = 0; u < PF; ++u) load(ring[u], first, u);
    for (int tile = first; tile < n_tiles; tile += stride) {
      const int next = tile + stride;
#pragma unroll
      for (int c = 0; c < STEPS; ++c) {
        const int ahead = c + PF;
        if (ahead < STEPS) {
          load(ring[ahead % (PF + 1)], tile, ahead);
        } else if (next < n_tiles) {
          load(ring[ahead % (PF + 1)], next, ahead - STEPS);
        }
        math(ring[c % (PF + 1)], tile, c);
      }
      emit(tile);
    }
  } else {
    const int total = (n_tiles - first + stride - 1) / stride * STEPS;
#pragma unroll
    for (int u = 0; u < PF; ++u)
      if (u < total) load(ring[u], first + u / STEPS * stride, u % STEPS);
    for (int s0 = 0; s0 < total; s0 += PF + 1) {
#pragma unroll
      for (int u = 0; u <= PF; ++u) {
        const int s = s0 + u;
        if (s >= total) break;
        const int ahead = s + PF;
        if (ahead < total) load(ring[(u + PF) % (PF + 1)], first + ahead / STEPS * stride, ahead % STEPS);
        const int tile = first + s / STEPS * stride, step = s % STEPS;
        math(ring[u], tile, step);
        if (step == STEPS - 1) emit(tile);
      }
    }
  }
}

// The row tiles of one pair chunk (TILE rows each) through this warp's rows t (t.first: its
// first row of tile 0), in column chunks of kMoeChunk, against the NTC activation rows staged
// in xs (no block barrier inside: each warp streams on its own). emit(tile, acc) gets
// acc[r][j] = row r . activation row j (full sums, in every lane).
template <int NTC, int PF, int TILE, class Rows, class Emit>
__device__ __forceinline__ void moe_stream_tiles(int n_tiles, const float4* xs, Rows t, Emit emit) {
  constexpr int K = Rows::K_DIM, W_FMT = Rows::FMT, NR = Rows::NR;
  constexpr int KC = (K + kMoeChunk - 1) / kMoeChunk;  // column chunks per row
  using Loads = MoeChunkWeights<K, W_FMT, NR>;
  const int first0 = t.first;
  auto rows_of = [&](int tile) {
    Rows r = t;
    r.first = first0 + tile * TILE;
    return r;
  };
  float acc[NR][NTC];
  auto zero = [&] {
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int j = 0; j < NTC; ++j) acc[r][j] = 0.f;
  };
  zero();
  moe_ring_stream<PF, KC, Loads>(
      n_tiles, [&](Loads& cw, int tile, int c) { moe_chunk_load(rows_of(tile), c * kMoeChunk, cw); },
      [&](const Loads& cw, int tile, int c) { moe_chunk_dot<NTC>(rows_of(tile), cw, c * kMoeChunk, xs + c * (kMoeChunk / 4), acc); },
      [&](int tile) {
#pragma unroll
        for (int r = 0; r < NR; ++r)
#pragma unroll
          for (int j = 0; j < NTC; ++j) acc[r][j] = warp_sum(acc[r][j]);
        emit(tile, acc);
        zero();
      });
}

// ---- Tensor-core path (MMA 1, INT4 only; see the doc block) ----------------------------------

// Warp-collective helpers: the PTX instruction on the device; on the host shim (CPU tests) an
// emulation of the same fragment semantics (tests/unit/codegen/cuda_host_shim.h).
// d += a * b: mma.sync m16n8k16, A 16x16 bf16 (row), B 16x8 bf16 (col), C = D 16x8 f32.
__device__ __forceinline__ void moe_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::mma_m16n8k16_bf16(d, a, b0, b1);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// d = a * b (C = 0 passed as an operand: no zeroing moves for each group's temporary).
__device__ __forceinline__ void moe_mma_zero(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#ifdef KP_HOST_SHIM
  d[0] = d[1] = d[2] = d[3] = 0.f;
  ::kplan::cuda_host::mma_m16n8k16_bf16(d, a, b0, b1);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%10, %10, %10, %10};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
#endif
}

// a * b + c on two bf16 lanes, rounded to nearest (exact for the dequantisation below).
__device__ __forceinline__ unsigned moe_bf16x2_fma(unsigned a, unsigned b, unsigned c) {
#ifdef KP_HOST_SHIM
  return ::kplan::cuda_host::bf16x2_fma(a, b, c);
#else
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#endif
}

// (v & 0x000F000F) | 0x43004300: nibbles 0 and 4 of v in the low mantissa bits of bf16 128, as
// ONE lop3 (written from C++, ptxas splits it in two: a SASS LOP3 holds one immediate operand).
__device__ __forceinline__ unsigned moe_nibbles_into_128(unsigned v) {
#ifdef KP_HOST_SHIM
  return (v & 0x000F000Fu) | 0x43004300u;
#else
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(v), "n"(0x000F000F), "n"(0x43004300));  // (a & b) | c
  return d;
#endif
}

// One packed word (nibbles n0..n7, nibble j = column j) as four bf16x2 A-fragment words of
// (q - 8): p[k] = {n_k, n_k+4} (low half first). A nibble OR-ed into the low mantissa bits of
// bf16 128 (0x4300) is 128 + q exactly; one bf16x2 FMA takes it to q - 8 (bf16 has 7 mantissa
// bits, so each pair is first shifted down to bits 0..3 / 16..19). Per word: 3 shifts, 4 LOP3,
// 4 HFMA2: ~1.4 instructions per weight, no int->float conversion. BIAS (MMA 3, 4): the words
// stay 128 + q (no HFMA2: ~0.9 instructions a weight); the MMA's C subtracts 136 x the group's
// activation sum instead (moe_stage_mma).
template <bool BIAS = false>
__device__ __forceinline__ void moe_dequant_bf16x2(unsigned w, unsigned (&p)[4]) {
  constexpr unsigned kOne = 0x3F803F80u;   // {1, 1}
  constexpr unsigned kM136 = 0xC308C308u;  // {-136, -136}
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    p[k] = moe_nibbles_into_128(w >> (4 * k));
    if constexpr (!BIAS) p[k] = moe_bf16x2_fma(p[k], kOne, kM136);
  }
}

// Staged activations of the MMA path: per token t, group X (32 columns) and quad lane q, two
// uint4 of bf16x2 B-fragment words, hi then lo (swapped on odd tokens: the two tokens a
// quarter warp reads then hit distinct banks): word e = {x[32X + 8q + e], x[32X + 8q + 4 + e]},
// the column order moe_dequant_bf16x2 gives the weights. Same bytes as f32: NT x K x 4.
// XB 1 (activations rounded to bf16 once, one MMA a k-step): the hi words only, NT x K x 2
// bytes (G rounded up to even a token); odd tokens' groups are swapped pairwise so the two
// tokens a quarter warp reads sit 64 bytes apart (distinct banks).
template <int G, int XB = 0>
__device__ __forceinline__ int moe_mma_xs_slot(int t, int X, int q, int lo) {
  if constexpr (XB) return (t * (G + G % 2) + (X ^ (t & 1))) * 4 + q;
  return ((t * G + X) * 4 + q) * 2 + (lo ^ (t & 1));
}

// A lane's staged words of each n-tile's token tok[n] (moe_mma_xs_slot's order) as two bases, made
// once, so that group X's address is a base plus X's offset: with X = 4 sb + i (i unrolled, sb
// even-aligned) a group's loads are one per-sub-block add and immediates, where the slot's product
// and XOR took ~4 integer instructions a group (the sm_90 SASS of session 41). XB 1: X ^ (t & 1)
// is X + p for even X and X - p for odd (p = t & 1), so a = the even groups' base, b = the odd
// groups'; XB 0: a = the hi words' base, b = the lo words'.
template <int G, int XB, int NTILE>
struct MoeXsTokens {
  const uint4* a[NTILE];
  const uint4* b[NTILE];
  __device__ __forceinline__ MoeXsTokens(const uint4* xs, const int (&tok)[NTILE], int q) {
#pragma unroll
    for (int n = 0; n < NTILE; ++n) {
      const int t = tok[n], p = t & 1;
      if constexpr (XB) {
        const uint4* row = xs + t * (G + G % 2) * 4 + q;
        a[n] = row + 4 * p, b[n] = row - 4 * p;
      } else {
        const uint4* row = xs + (t * G * 4 + q) * 2;
        a[n] = row + p, b[n] = row + (p ^ 1);
      }
    }
  }
  __device__ __forceinline__ uint4 hi(int n, int X) const { return XB ? (X & 1 ? b[n] : a[n])[4 * X] : a[n][8 * X]; }
  __device__ __forceinline__ uint4 lo(int n, int X) const { return b[n][8 * X]; }  // XB 0 only
};

// BIAS (MMA 3, 4): after the NT x K x 4 bytes of words, per group X, n-tile n and quad lane q a
// float4 C fragment {b(8n + 2q), b(8n + 2q + 1), the same two} (D rows g and g + 8 share the
// tokens), b(t) = -136 x the sum of token t's 32 staged values of group X (hi + lo, as the MMA
// sees them; 0 past nt), so the group's first MMA starts from it and D = sum (q - 8) x.
template <int K, int XB = 0>
__device__ constexpr int moe_mma_bias_offset(int nt_max) {
  return XB ? nt_max * (K / 32 + K / 32 % 2) * 4 : nt_max * (K / 32) * 8;  // in uint4, past the staged words of nt_max tokens
}

// Stages nt activation rows (row r at element offset rows[r]) of K columns, split into bf16
// hi + lo (x - hi, rounded: x kept to ~2^-17 of itself; products with the bf16 weights exact);
// XB 1: hi only (x rounded to bf16).
template <int K, int DT, int THREADS, bool BIAS = false, int NT = 1, int NTILE = 1, int XB = 0>
__device__ __forceinline__ void moe_stage_mma(uint4* xs, const void* x, const i64* rows, int nt) {
  constexpr int G = K / 32;
  for (int idx = threadIdx.x; idx < nt * G * 4; idx += THREADS) {
    const int q = idx % 4, X = (idx / 4) % G, t = idx / (4 * G);
    const i64 c = rows[t] + 32 * X + 8 * q;
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = load<DT>(x, c + u);
    unsigned hi[4], lo[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const unsigned short h0 = f32_to_bf16(v[e]), h1 = f32_to_bf16(v[4 + e]);
      hi[e] = static_cast<unsigned>(h0) | (static_cast<unsigned>(h1) << 16);
      lo[e] = static_cast<unsigned>(f32_to_bf16(v[e] - bf16_to_f32(h0))) |
              (static_cast<unsigned>(f32_to_bf16(v[4 + e] - bf16_to_f32(h1))) << 16);
    }
    uint4& dh = xs[moe_mma_xs_slot<G, XB>(t, X, q, 0)];
    dh.x = hi[0], dh.y = hi[1], dh.z = hi[2], dh.w = hi[3];
    if constexpr (!XB) {
      uint4& dl = xs[moe_mma_xs_slot<G>(t, X, q, 1)];
      dl.x = lo[0], dl.y = lo[1], dl.z = lo[2], dl.w = lo[3];
    }
  }
  if constexpr (BIAS) {
    __syncthreads();  // the words above are read back
    float* bias = reinterpret_cast<float*>(xs + moe_mma_bias_offset<K, XB>(NT));
    for (int idx = threadIdx.x; idx < G * NTILE * 8; idx += THREADS) {
      const int X = idx / (NTILE * 8), t = idx % (NTILE * 8);
      float sum = 0.f;
      if (t < nt) {
        for (int q = 0; q < 4; ++q)
          for (int lo = 0; lo < (XB ? 1 : 2); ++lo) {
            const uint4 v = xs[moe_mma_xs_slot<G, XB>(t, X, q, lo)];
            const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) sum += __uint_as_float(w[e] << 16) + __uint_as_float(w[e] & 0xffff0000u);
          }
      }
      const int n = t / 8, c = t % 8;  // token t: column c of n-tile n, held by quad lane c / 2
      float* slot = bias + ((X * NTILE + n) * 4 + c / 2) * 4 + c % 2;
      slot[0] = slot[2] = -136.f * sum;
    }
  }
}

// A warp's row tile as m-tiles of 16 A rows: gate/up m-tile j = gate rows 8j .. 8j + 8 (A rows
// 0..7) and the same up rows (A rows 8..15), so a lane's D fragment holds both halves of its
// SwiGLU; down m-tile j = rows 16j .. 16j + 16. A row 8 h + g of m-tile j: its matrix, its
// scales and its row within the warp's rows (selects, not an indexed pointer array: h may
// differ between lanes).
struct MoeMmaSrc {
  const void* w;
  const unsigned short* s;
  int i;
};
template <class Rows>
__device__ __forceinline__ MoeMmaSrc moe_mma_src(const Rows& t, int j, int h, int g) {
  if constexpr (Rows::N_MATS == 2) return {h ? t.w[1] : t.w[0], h ? t.s[1] : t.s[0], 8 * j + g};
  return {t.w[0], t.s[0], 16 * j + 8 * h + g};
}

constexpr int kMoeMmaSub = 4;  // groups (of 32 columns) per transposed sub-block: 128 columns

template <bool B, class T, class F>
struct MoeIf {
  using type = T;
};
template <class T, class F>
struct MoeIf<false, T, F> {
  using type = F;
};

// One step's loads: SUBS sub-blocks of the warp's MT m-tiles. Lane (g, q) loads group 4 sb + q
// of A rows g and g + 8 (16 bytes each: a quad reads 64 contiguous bytes of a row), and the bf16
// scales of the step's SG groups of both its rows (one 16-byte load a row at SG 8, 8 bytes at 4:
// the quad's 4 lanes read the same bytes, from L1 after the first; no shuffles in the math).
// Rows past the matrix and groups past K load nothing (zeros).
template <int MT, int SUBS>
struct MoeMmaLoads {
  static constexpr int SG = SUBS * 4;  // groups a step (kMoeMmaSub each sub-block)
  uint4 q[SUBS][MT][2];
  unsigned s[MT][2][SG / 2];  // bf16 pairs: groups 2w, 2w + 1 of A rows g (h 0) and g + 8 (h 1)
};

template <int MT, int SUBS, class Rows>
__device__ __forceinline__ void moe_mma_load(const Rows& t, int step, MoeMmaLoads<MT, SUBS>& L) {
  constexpr int G = Rows::K_DIM / 32, SG = MoeMmaLoads<MT, SUBS>::SG;  // groups a step
  static_assert(SG == 4 || SG == 8, "a step holds 4 or 8 groups");
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const MoeMmaSrc r = moe_mma_src(t, j, h, g);
      if constexpr (Rows::W_LAYOUT == 1) {  // the fragment words and the rows' scales, sub-block by sub-block
        const bool valid = t.valid(r.i);
#pragma unroll
        for (int sb = 0; sb < SUBS; ++sb) {
          const int sub = step * SUBS + sb;
          const bool in = sub * kMoeMmaSub < G && valid;
          L.q[sb][j][h] = in ? __ldcs(moe_frag_words<Rows::K_DIM>(r.w, t.row(r.i), sub) + lane) : uint4{0u, 0u, 0u, 0u};
          const uint2 v = in ? __ldg(moe_frag_scales<Rows::K_DIM>(r.s, t.row(r.i), sub) + g) : uint2{0u, 0u};
          L.s[j][h][2 * sb] = v.x, L.s[j][h][2 * sb + 1] = v.y;
        }
        continue;
      }
#pragma unroll
      for (int sb = 0; sb < SUBS; ++sb) {
        const int gi = (step * SUBS + sb) * kMoeMmaSub + q;
        L.q[sb][j][h] = (G % SG == 0 || gi < G) && t.valid(r.i) ? __ldcs(static_cast<const uint4*>(moe_row<Rows::K_DIM, 1>(r.w, t.row(r.i))) + gi)
                                               : uint4{0u, 0u, 0u, 0u};
      }
      const int g0 = step * SG;
      const unsigned short* sp = moe_row_scale<Rows::K_DIM, 1>(r.s, t.row(r.i)) + g0;
      if constexpr (G % SG == 0 && SG == 8) {  // rows of whole steps: 16-byte aligned (G * 2 bytes a row)
        const uint4 v = t.valid(r.i) ? __ldg(reinterpret_cast<const uint4*>(sp)) : uint4{0u, 0u, 0u, 0u};
        L.s[j][h][0] = v.x, L.s[j][h][1] = v.y, L.s[j][h][2] = v.z, L.s[j][h][3] = v.w;
      } else if constexpr (G % SG == 0) {
        const uint2 v = t.valid(r.i) ? __ldg(reinterpret_cast<const uint2*>(sp)) : uint2{0u, 0u};
        L.s[j][h][0] = v.x, L.s[j][h][1] = v.y;
      } else {
#pragma unroll
        for (int w = 0; w < SG / 2; ++w) {
          const unsigned lo = g0 + 2 * w < G && t.valid(r.i) ? __ldg(sp + 2 * w) : 0u;
          const unsigned hi = g0 + 2 * w + 1 < G && t.valid(r.i) ? __ldg(sp + 2 * w + 1) : 0u;
          L.s[j][h][w] = lo | (hi << 16);
        }
      }
    }
  }
}

// Group gi (of the step) of A row g + 8 h's scale.
template <int MT, int SUBS>
__device__ __forceinline__ float moe_mma_scale(const MoeMmaLoads<MT, SUBS>& L, int j, int gi, int h) {
  const unsigned w = L.s[j][h][gi / 2];
  return __uint_as_float(gi % 2 ? w & 0xffff0000u : w << 16);
}

// The same loads with the scales of 4 groups a lane, shared over the quad by shuffles in the
// math (2 registers a step, not 8: down keeps 2 blocks an SM under 128 registers this way).
// One step's loads: SUBS sub-blocks of the warp's MT m-tiles. Lane (g, q) loads group 4 sb + q
// of A rows g and g + 8 (16 bytes each: a quad reads 64 contiguous bytes of a row), and four
// bf16 scales: groups 4 (q & 1) .. + 4 of the step, of A row g + 8 (q >> 1) (the math takes
// each group's from its quad by a shuffle: 2 registers a step, not 4 per group pair). Rows past
// the matrix and groups past K load nothing (zeros).
template <int MT, int SUBS>
struct MoeMmaLoadsShfl {
  uint4 q[SUBS][MT][2];
  uint2 s[MT];
};

template <int MT, int SUBS, class Rows>
__device__ __forceinline__ void moe_mma_load(const Rows& t, int step, MoeMmaLoadsShfl<MT, SUBS>& L) {
  constexpr int G = Rows::K_DIM / 32, SG = SUBS * kMoeMmaSub;  // groups a step
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  if constexpr (Rows::W_LAYOUT == 1) {  // the fragment words; scales: sub-block q & 1 of the step, A row g + 8 (q >> 1)
#pragma unroll
    for (int j = 0; j < MT; ++j) {
#pragma unroll
      for (int s = 0; s < SUBS; ++s) {
        const int sub = step * SUBS + s;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const MoeMmaSrc r = moe_mma_src(t, j, h, g);
          L.q[s][j][h] = sub * kMoeMmaSub < G && t.valid(r.i) ? __ldcs(moe_frag_words<Rows::K_DIM>(r.w, t.row(r.i), sub) + lane)
                                                               : uint4{0u, 0u, 0u, 0u};
        }
      }
      const MoeMmaSrc r = moe_mma_src(t, j, q >> 1, g);
      const int sub = step * SUBS + (q & 1);
      L.s[j] = kMoeMmaSub * (q & 1) < SG && sub * kMoeMmaSub < G && t.valid(r.i) ? __ldg(moe_frag_scales<Rows::K_DIM>(r.s, t.row(r.i), sub) + g)
                                                                                   : uint2{0u, 0u};
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int s = 0; s < SUBS; ++s) {
      const int gi = (step * SUBS + s) * kMoeMmaSub + q;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const MoeMmaSrc r = moe_mma_src(t, j, h, g);
        L.q[s][j][h] = (G % SG == 0 || gi < G) && t.valid(r.i) ? __ldcs(static_cast<const uint4*>(moe_row<Rows::K_DIM, 1>(r.w, t.row(r.i))) + gi)
                                              : uint4{0u, 0u, 0u, 0u};
      }
    }
    const MoeMmaSrc r = moe_mma_src(t, j, q >> 1, g);
    const int g0 = step * SG + kMoeMmaSub * (q & 1);
    uint2 sc{0u, 0u};
    if (kMoeMmaSub * (q & 1) < SG && (G % SG == 0 || g0 < G) && t.valid(r.i)) {
      const unsigned short* sp = moe_row_scale<Rows::K_DIM, 1>(r.s, t.row(r.i)) + g0;
      if constexpr (G % 4 == 0) {
        sc = __ldg(reinterpret_cast<const uint2*>(sp));
      } else {
        unsigned v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = g0 + i < G ? __ldg(sp + i) : 0u;
        sc.x = v[0] | (v[1] << 16);
        sc.y = v[2] | (v[3] << 16);
      }
    }
    L.s[j] = sc;
  }
}

// Group gi (of the step) of A row g + 8 h's scale, from the quad lane that loaded it.
template <int MT, int SUBS>
__device__ __forceinline__ float moe_mma_scale(const MoeMmaLoadsShfl<MT, SUBS>& L, int j, int gi, int h) {
  const int lane = threadIdx.x % 32;
  const unsigned w = __shfl_sync(0xffffffffu, gi % 4 < 2 ? L.s[j].x : L.s[j].y, (lane & ~3) | (2 * h + gi / 4));
  return __uint_as_float(gi % 2 ? w & 0xffff0000u : w << 16);
}

// Transposition buffer slot of (A row a, group i) of a sub-block: XOR-swizzled so that both the
// lanes' 16-byte stores and ldmatrix's 8-row phases hit 8 distinct 16-byte bank groups.
__device__ __forceinline__ int moe_mma_tb_slot(int a, int i) { return a * 4 + (i ^ ((a >> 1) & 3)); }

// Whether n-tile n holds any of the chunk's nt pairs (uniform over the warp; n-tile 0 always):
// the MMAs, activation loads and FMAs of an n-tile past them are skipped, not computed and
// dropped (down's NT 16 at 1..8 pairs spent half its tensor-core work a step on padding).
__device__ __forceinline__ bool moe_ntile_live(int n, int nt) { return n == 0 || 8 * n < nt; }

// acc[j][n] (D fragments: A rows g, g + 8 of m-tile j; tokens 8n + 2q, + 1) += sub-block sb's
// 4 groups, w[j][h][i] being word q of group 4 sb + i of A row g + 8 h (after the transposition)
// and scale(j, i, h) its scale: per group 2 words dequantised (moe_dequant_bf16x2), its two
// k-steps into a temp (hi and lo activations: 4 MMAs per n-tile), then acc += scale * temp.
// The shared-memory ring's math (moe_ring_math). moe_mma_math below holds the same loop inline:
// written through this function, the register ring's sm_90 code changed (1199 of 1848 gate/up
// instructions, same registers), and that code is the one the H200 has checked and measured; the
// two become one when the ring is measured and one of them is the default.
template <int MT, int NTILE, int G, bool BIAS, int XB, class Scale>
__device__ __forceinline__ void moe_mma_sub(const unsigned (&w)[MT][2][4], int sb, Scale scale, const uint4* xs, const float4* bias,
                                            int nt, const int (&tok)[NTILE], float (&acc)[MT][NTILE][4]) {
  const int q = threadIdx.x % 4;
  const MoeXsTokens<G, XB, NTILE> xt(xs, tok, q);
#pragma unroll
  for (int i = 0; i < kMoeMmaSub; ++i) {
    const int X = sb * kMoeMmaSub + i;
    if (G % (2 * kMoeMmaSub) != 0 && X >= G) break;  // uniform; never in whole steps (moe_mma_math says why)
    uint4 bh[NTILE], bl[NTILE];
#pragma unroll
    for (int n = 0; n < NTILE; ++n) {
      if (!moe_ntile_live(n, nt)) break;
      bh[n] = xt.hi(n, X);
      if constexpr (!XB) bl[n] = xt.lo(n, X);
    }
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      unsigned p[4], r[4];
      moe_dequant_bf16x2<BIAS>(w[j][0][i], p);
      moe_dequant_bf16x2<BIAS>(w[j][1][i], r);
      const float sg = scale(j, i, 0), sg8 = scale(j, i, 1);
      const unsigned a0[4] = {p[0], r[0], p[1], r[1]}, a1[4] = {p[2], r[2], p[3], r[3]};
#pragma unroll
      for (int n = 0; n < NTILE; ++n) {
        if (!moe_ntile_live(n, nt)) break;
        float d[4];
        if constexpr (BIAS) {
          const float4 c = bias[(X * NTILE + n) * 4 + q];
          d[0] = c.x, d[1] = c.y, d[2] = c.z, d[3] = c.w;
          moe_mma(d, a0, bh[n].x, bh[n].y);
        } else {
          moe_mma_zero(d, a0, bh[n].x, bh[n].y);
        }
        if constexpr (!XB) moe_mma(d, a0, bl[n].x, bl[n].y);
        moe_mma(d, a1, bh[n].z, bh[n].w);
        if constexpr (!XB) moe_mma(d, a1, bl[n].z, bl[n].w);
        acc[j][n][0] = fmaf(sg, d[0], acc[j][n][0]);
        acc[j][n][1] = fmaf(sg, d[1], acc[j][n][1]);
        acc[j][n][2] = fmaf(sg8, d[2], acc[j][n][2]);
        acc[j][n][3] = fmaf(sg8, d[3], acc[j][n][3]);
      }
    }
  }
}

// The chunk's token of each n-tile column this lane's B fragments read (columns past nt read
// the last pair's row; their results are dropped).
template <int NTILE>
__device__ __forceinline__ void moe_mma_tokens(int nt, int (&tok)[NTILE]) {
  const int g = threadIdx.x % 32 / 4;
#pragma unroll
  for (int n = 0; n < NTILE; ++n) tok[n] = 8 * n + g < nt ? 8 * n + g : nt - 1;
}

// acc += the step's groups from the register ring's loads L: per sub-block and m-tile the lanes'
// loads go through the warp's transposition buffer (two 16-byte stores, __syncwarp, two
// ldmatrix.x4) so lane (g, q) holds word q of every group of rows g and g + 8 (moe_mma_sub).
// FRAG (W_LAYOUT 1): the loads are already the fragment words; no transposition.
template <int MT, int SUBS, int NTILE, int G, bool BIAS, bool FRAG, int XB, class Loads>
__device__ __forceinline__ void moe_mma_math(const Loads& L, int step, const uint4* xs, const float4* bias, int nt, uint4* tb,
                                             unsigned& flip, float (&acc)[MT][NTILE][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  int tok[NTILE];
#pragma unroll
  for (int n = 0; n < NTILE; ++n) tok[n] = 8 * n + g < nt ? 8 * n + g : nt - 1;  // columns past nt: dropped
  const MoeXsTokens<G, XB, NTILE> xt(xs, tok, q);
#pragma unroll
  for (int s = 0; s < SUBS; ++s) {
    const int sb = step * SUBS + s;
    // Uniform over the warp. Rows of whole steps (K2.6's) never take these exits, and they are
    // compiled out there: a run-time exit between groups ended a basic block, so ptxas scheduled
    // each group's chain (activation LDS -> dequantisation -> 2 HMMAs -> scale FMAs) alone, one
    // after another (the sm_90 SASS of session 41: an ISETP + BRA after every group of gate/up).
    if (G % (SUBS * kMoeMmaSub) != 0 && sb * kMoeMmaSub >= G) break;
    unsigned w[MT][2][4];
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      if constexpr (FRAG) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 v = L.q[s][j][h];
          w[j][h][0] = v.x, w[j][h][1] = v.y, w[j][h][2] = v.z, w[j][h][3] = v.w;
        }
        continue;
      }
      uint4* buf = tb + 64 * (flip & 1u);
      ++flip;  // two buffers: a store never overwrites words another lane may still be reading
      buf[moe_mma_tb_slot(g, q)] = L.q[s][j][0];
      buf[moe_mma_tb_slot(g + 8, q)] = L.q[s][j][1];
      __syncwarp();
      ldsm_x4(w[j][0], buf + moe_mma_tb_slot(lane % 8, lane / 8));
      ldsm_x4(w[j][1], buf + moe_mma_tb_slot(8 + lane % 8, lane / 8));
    }
#pragma unroll
    for (int i = 0; i < kMoeMmaSub; ++i) {
      const int X = sb * kMoeMmaSub + i;
      if (G % kMoeMmaSub != 0 && X >= G) break;  // uniform: a partial sub-block (past it, sb's exit above)
      uint4 bh[NTILE], bl[NTILE];
#pragma unroll
      for (int n = 0; n < NTILE; ++n) {
        if (!moe_ntile_live(n, nt)) break;
        bh[n] = xt.hi(n, X);
        if constexpr (!XB) bl[n] = xt.lo(n, X);
      }
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        unsigned p[4], r[4];
        moe_dequant_bf16x2<BIAS>(w[j][0][i], p);
        moe_dequant_bf16x2<BIAS>(w[j][1][i], r);
        const float sg = moe_mma_scale(L, j, kMoeMmaSub * s + i, 0), sg8 = moe_mma_scale(L, j, kMoeMmaSub * s + i, 1);
        const unsigned a0[4] = {p[0], r[0], p[1], r[1]}, a1[4] = {p[2], r[2], p[3], r[3]};
#pragma unroll
        for (int n = 0; n < NTILE; ++n) {
          if (!moe_ntile_live(n, nt)) break;
          float d[4];
          if constexpr (BIAS) {
            const float4 c = bias[(X * NTILE + n) * 4 + q];
            d[0] = c.x, d[1] = c.y, d[2] = c.z, d[3] = c.w;
            moe_mma(d, a0, bh[n].x, bh[n].y);
          } else {
            moe_mma_zero(d, a0, bh[n].x, bh[n].y);
          }
          if constexpr (!XB) moe_mma(d, a0, bl[n].x, bl[n].y);
          moe_mma(d, a1, bh[n].z, bh[n].w);
          if constexpr (!XB) moe_mma(d, a1, bl[n].z, bl[n].w);
          acc[j][n][0] = fmaf(sg, d[0], acc[j][n][0]);
          acc[j][n][1] = fmaf(sg, d[1], acc[j][n][1]);
          acc[j][n][2] = fmaf(sg8, d[2], acc[j][n][2]);
          acc[j][n][3] = fmaf(sg8, d[3], acc[j][n][3]);
        }
      }
    }
  }
}

// ---- The shared-memory ring (RING >= 2; see the doc block) ----------------------------------

// A stage of a warp's ring (one m-tile, steps of 8 groups): the two sub-blocks' 16 rows x 4
// groups in the transposition buffers' swizzled order (moe_mma_tb_slot), then the 16 A rows'
// 8 bf16 scales of the step, 16 bytes a row.
constexpr int kMoeRingStage = 2 * 64 + 16;  // uint4: 2304 bytes

// Issues step `step`'s copies of the warp's m-tile (rows t) into `stage`: lane (g, q) copies
// group q of each sub-block of A rows g and g + 8 into the slots ldmatrix reads (no stores from
// registers), lanes 0..15 the scales of A row `lane`. Rows past the matrix copy zeros.
template <class Rows>
__device__ __forceinline__ void moe_ring_issue(const Rows& t, int step, uint4* stage) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int sb = 0; sb < 2; ++sb) {
    const int gi = (2 * step + sb) * kMoeMmaSub + q;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const MoeMmaSrc r = moe_mma_src(t, 0, h, g);
      cp_async16<true>(stage + 64 * sb + moe_mma_tb_slot(g + 8 * h, q),
                           static_cast<const uint4*>(moe_row<Rows::K_DIM, 1>(r.w, t.row(r.i))) + gi, t.valid(r.i));
    }
  }
  if (lane < 16) {
    const MoeMmaSrc r = moe_mma_src(t, 0, lane / 8, lane % 8);
    cp_async16<false>(stage + 128 + lane, moe_row_scale<Rows::K_DIM, 1>(r.s, t.row(r.i)) + 8 * step, t.valid(r.i));
  }
}

// acc += step `step`'s 8 groups from a filled stage: ldmatrix straight from the copied slots, the
// scales of A rows g and g + 8 as two 16-byte reads (the quad's lanes read the same bytes).
template <int NTILE, int G, bool BIAS, int XB>
__device__ __forceinline__ void moe_ring_math(const uint4* stage, int step, const uint4* xs, const float4* bias, int nt,
                                              float (&acc)[1][NTILE][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4;
  int tok[NTILE];
  moe_mma_tokens<NTILE>(nt, tok);
  const uint4 sc[2] = {stage[128 + g], stage[128 + 8 + g]};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    unsigned w[1][2][4];
    ldsm_x4(w[0][0], stage + 64 * s + moe_mma_tb_slot(lane % 8, lane / 8));
    ldsm_x4(w[0][1], stage + 64 * s + moe_mma_tb_slot(8 + lane % 8, lane / 8));
    moe_mma_sub<1, NTILE, G, BIAS, XB>(
        w, 2 * step + s,
        [&](int, int i, int h) {
          const int gi = kMoeMmaSub * s + i;  // group of the step: bf16 gi of A row g + 8 h's 16 bytes
          const unsigned word = gi / 2 == 0 ? sc[h].x : gi / 2 == 1 ? sc[h].y : gi / 2 == 2 ? sc[h].z : sc[h].w;
          return __uint_as_float(gi % 2 ? word & 0xffff0000u : word << 16);
        },
        xs, bias, nt, tok, acc);
  }
}

// W_LAYOUT 1's stage (the same 2304 bytes): the step's fragment words, uint4 (sb, h, lane) at
// (2 sb + h) * 32 + lane, then its scales, 128 + (2 h + sb) * 4 + the uint4 of the octet's
// 64-byte run (row g's 4 bf16 at uint2 g of the run). Why a shared-memory ring for these loads at
// all: in the register ring (PF) ptxas gives every global load of the loop one scoreboard, so the
// first use of the oldest step waits for all of them, the step just issued too (sm_90 SASS,
// bench/RESULTS.md 2026-12-06 session 38): the loads ahead drain twice every three steps.
// cp.async groups are waited for by count (wait_group RING - 1): the steps ahead stay in flight.
//
// A warp's row tile as the W_LAYOUT 1 ring copies it, made once a tile (a step then adds its
// sub-blocks' offsets: no row arithmetic a step): per A-row half h this lane's 16 bytes of the
// octet's first sub-block; lanes < 16 (lane 4 (2 h + sb) + piece) their 16 bytes of the scale run of
// sub-block sb of A rows 8 h .. 8 h + 8's octet; whether those octets are in the matrix.
struct MoeFragTile {
  const uint4* w[2];
  const uint4* s;
  bool valid[2], s_valid;
};
template <class Rows>
__device__ __forceinline__ MoeFragTile moe_frag_tile(const Rows& t) {
  const int lane = threadIdx.x % 32, g = lane / 4;
  MoeFragTile f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const MoeMmaSrc r = moe_mma_src(t, 0, h, g);
    f.w[h] = moe_frag_words<Rows::K_DIM>(r.w, t.row(r.i), 0) + lane;
    f.valid[h] = t.valid(r.i);
  }
  const MoeMmaSrc r = moe_mma_src(t, 0, lane / 8 % 2, g % 4);  // a row of the octet (the run is the octet's)
  f.s = reinterpret_cast<const uint4*>(moe_frag_scales<Rows::K_DIM>(r.s, t.row(r.i), lane / 4 % 2)) + lane % 4;
  f.s_valid = t.valid(r.i);
  return f;
}

// Issues step `step`'s copies of tile f into `stage` (sub-blocks 2 step, 2 step + 1).
__device__ __forceinline__ void moe_frag_ring_issue(const MoeFragTile& f, int step, uint4* stage) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int sb = 0; sb < 2; ++sb)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      cp_async16<true>(stage + (2 * sb + h) * 32 + lane, f.w[h] + (2 * step + sb) * (kplan::int4_frag::kSubWords / 4), f.valid[h]);
  if (lane < 16) cp_async16<false>(stage + 128 + lane, f.s + 2 * step * (kplan::int4_frag::kSubScales / 8), f.s_valid);
}

// The copy cursor of a warp's ring stream (either copier): the next copy's tile, step and stage
// and that tile's source (make_tile(tile), once a tile), moved along a step at a time.
template <int RING, int STEPS, class Tile, class MakeTile>
struct MoeRingCursor {
  int tile, step, stage;
  int n_tiles, stride;
  MakeTile make_tile;
  Tile src;
  // issue(src, step, stage) for the copy at the cursor where its tile exists; then the cursor moves on.
  template <class Issue>
  __device__ __forceinline__ void advance(Issue issue) {
    if (tile < n_tiles) issue(src, step, stage);
    stage = stage + 1 == RING ? 0 : stage + 1;
    if (++step == STEPS) {
      step = 0;
      tile += stride;
      if (tile < n_tiles) src = make_tile(tile);
    }
  }
};
template <int RING, int STEPS, class MakeTile>
__device__ __forceinline__ auto moe_ring_cursor(int first, int n_tiles, int stride, MakeTile make_tile) {
  return MoeRingCursor<RING, STEPS, decltype(make_tile(first)), MakeTile>{first, 0, 0, n_tiles, stride, make_tile, make_tile(first)};
}

// The shared-memory ring's stream (RING >= 2, either layout): the row tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... as one sequence of STEPS steps each, RING - 1 steps' copies in flight
// ahead of the math in the warp's RING stages at `ring`: make_tile(tile) gives a tile's source
// (once a tile), issue(source, step, stage) copies a step in, math(stage, step) consumes it,
// emit(tile) follows a tile's last step. Every step commits one group (empty past the last step),
// so waiting until RING - 1 groups remain in flight always means this step's copies have landed.
// The copy and math cursors (tile, step, stage) are moved along, not divided out of a step count
// (the divisions and per-step row arithmetic were ~110 of the int4_frag ring's first 544
// warp-instructions a step).
template <int RING, int STEPS, class MakeTile, class Issue, class Math, class Emit>
__device__ __forceinline__ void moe_smem_ring_stream(int n_tiles, uint4* ring, MakeTile make_tile, Issue issue, Math math, Emit emit) {
  const int first = blockIdx.x, stride = gridDim.x;
  if (first >= n_tiles) return;
  auto next = moe_ring_cursor<RING, STEPS>(first, n_tiles, stride, make_tile);
  auto copy_next = [&] {
    next.advance([&](const decltype(make_tile(0))& src, int step, int stage) { issue(src, step, ring + stage * kMoeRingStage); });
    cp_async_commit();
  };
#pragma unroll
  for (int u = 0; u < RING - 1; ++u) copy_next();
  int m_stage = 0;
  for (int tile = first; tile < n_tiles; tile += stride) {
    for (int step = 0; step < STEPS; ++step) {
      copy_next();  // into the stage the previous step used (every lane is past it: the __syncwarp below)
      cp_async_wait<RING - 1>();
      __syncwarp();  // the other lanes' copies of this step have landed too
      math(ring + m_stage * kMoeRingStage, step);
      __syncwarp();
      m_stage = m_stage + 1 == RING ? 0 : m_stage + 1;
    }
    emit(tile);
  }
}

// acc += step `step`'s 8 groups from a filled W_LAYOUT 1 stage: the lane's own fragment words and
// its rows' scales (the quad's lanes read the same bytes).
// OCTET_RUNS (the copy engine's stage, moe_bulk_issue): the words of half h's octet as one run,
// sub-block s of it at uint4 (2 h + s) * 32 instead of (2 s + h) * 32; the scales are where they were.
template <int NTILE, int G, bool BIAS, int XB, bool OCTET_RUNS = false>
__device__ __forceinline__ void moe_frag_ring_math(const uint4* stage, int step, const uint4* xs, const float4* bias, int nt,
                                                   float (&acc)[1][NTILE][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4;
  int tok[NTILE];
  moe_mma_tokens<NTILE>(nt, tok);
  const uint2* sc = reinterpret_cast<const uint2*>(stage + 128);
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    unsigned w[1][2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 v = stage[(OCTET_RUNS ? 2 * h + s : 2 * s + h) * 32 + lane];
      w[0][h][0] = v.x, w[0][h][1] = v.y, w[0][h][2] = v.z, w[0][h][3] = v.w;
    }
    const uint2 s0 = sc[s * 8 + g], s1 = sc[(2 + s) * 8 + g];  // A rows g (gate / rows 0..7) and g + 8
    moe_mma_sub<1, NTILE, G, BIAS, XB>(
        w, 2 * step + s,
        [&](int, int i, int h) {
          const unsigned word = i / 2 ? (h ? s1.y : s0.y) : (h ? s1.x : s0.x);
          return __uint_as_float(i % 2 ? word & 0xffff0000u : word << 16);
        },
        xs, bias, nt, tok, acc);
  }
}

// ---- The copy engine's ring (RING >= 2, TMA 1, W_LAYOUT 1; see the doc block) ---------------

// A warp's int4_frag row tile as the copy engine reads it: per A-row half h (gate / up, or down's
// rows 0..7 / 8..15) the first sub-block of the octet's words and of its scale run. A step is then
// four contiguous runs: each octet's sub-blocks 2 step and 2 step + 1 (1 KiB of words, 128 bytes
// of scales).
struct MoeBulkTile {
  const uint4* w[2];
  const uint4* s[2];
};
// step0 > 0 (a K part, KS): the tile's source from step step0 on (an octet's sub-blocks are one
// run of words and one of scales).
template <class Rows>
__device__ __forceinline__ MoeBulkTile moe_bulk_tile(const Rows& t, int step0 = 0) {
  MoeBulkTile f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const MoeMmaSrc r = moe_mma_src(t, 0, h, 0);
    f.w[h] = moe_frag_words<Rows::K_DIM>(r.w, t.row(r.i), 2 * step0);
    f.s[h] = reinterpret_cast<const uint4*>(moe_frag_scales<Rows::K_DIM>(r.s, t.row(r.i), 2 * step0));
  }
  return f;
}

// One lane: arms the stage's barrier for its 2304 bytes and starts step `step`'s four copies:
// octet h's words to uint4 64 h (moe_frag_ring_math's OCTET_RUNS order), its scales to 128 + 8 h
// (the cp.async stage's place for them).
__device__ __forceinline__ void moe_bulk_issue(const MoeBulkTile& f, int step, uint4* stage, unsigned long long* bar) {
  constexpr int kWordsStep = 2 * kplan::int4_frag::kSubWords / 4, kScalesStep = 2 * kplan::int4_frag::kSubScales / 8;  // uint4
  mbar_arm(bar, kMoeRingStage * 16);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    bulk_copy<true>(stage + 64 * h, f.w[h] + step * kWordsStep, kWordsStep * 16, bar);
    bulk_copy<false>(stage + 128 + 8 * h, f.s[h] + step * kScalesStep, kScalesStep * 16, bar);
  }
}

// The copy engine's stream: moe_smem_ring_stream's tiles, steps and cursors, but lane 0 copies a
// step in (moe_bulk_issue) and the warp waits on the stage's barrier, so all RING stages are in
// flight (cp.async keeps RING - 1: its wait_group counts groups) and no lane holds a copy's
// registers or issues a per-lane copy. Rows must be whole (every octet in the matrix: no zeros
// to write). bars: the warp's RING barriers, set up here and invalidated before returning (every
// copy issued has been waited for). before() (block-wide: staging the activations) runs once the
// first RING copies are issued, in every block, tiles or not.
template <int RING, int STEPS, class MakeTile, class Before, class Math, class Emit>
__device__ __forceinline__ void moe_bulk_ring_stream(int n_tiles, uint4* ring, unsigned long long* bars, MakeTile make_tile, Before before,
                                                     Math math, Emit emit) {
  const int first = blockIdx.x, stride = gridDim.x;
  if (first >= n_tiles) {
    before();
    return;
  }
  const bool issuer = threadIdx.x % 32 == 0;
  if (issuer)
#pragma unroll
    for (int i = 0; i < RING; ++i) mbar_init(&bars[i]);
  __syncwarp();
  auto next = moe_ring_cursor<RING, STEPS>(first, n_tiles, stride, make_tile);
  auto copy_next = [&] {
    next.advance([&](const MoeBulkTile& src, int step, int stage) {
      if (issuer) moe_bulk_issue(src, step, ring + stage * kMoeRingStage, &bars[stage]);
    });
  };
#pragma unroll
  for (int u = 0; u < RING; ++u) copy_next();
  before();
  unsigned phases = 0;  // bit i: stage i's barrier phase to wait for
  int m_stage = 0;
  for (int tile = first; tile < n_tiles; tile += stride) {
    for (int step = 0; step < STEPS; ++step) {
      mbar_wait(&bars[m_stage], (phases >> m_stage) & 1u);
      phases ^= 1u << m_stage;
      math(ring + m_stage * kMoeRingStage, step);
      __syncwarp();  // every lane has read the stage
      if (issuer) fence_async_smem();
      copy_next();  // into the stage just read
      m_stage = m_stage + 1 == RING ? 0 : m_stage + 1;
    }
    emit(tile);
  }
  __syncwarp();
  if (issuer)
#pragma unroll
    for (int i = 0; i < RING; ++i) mbar_inval(&bars[i]);
}

// moe_stream_tiles for MMA 1..4: the same tiles, in steps of 256 columns (MT 1) or 128 (MT 2), so
// a lane holds 4 16-byte loads a step. RING 0: the PF register ring (moe_ring_stream), the loads
// transposed through the warp's two buffers at wbuf; RING >= 2 (MT 1): the shared-memory ring at
// wbuf (RING stages a warp, moe_smem_ring_stream). emit(tile, acc) gets the D fragments.
// stage_rows() stages the chunk's activations at xs (block-wide, with its barriers): first, or,
// with TMA 1, once the ring's first RING steps are on their way (the weights' bytes land while
// the block stages: they depend on the expert only).
// KS > 1 (TMA 1): the warp streams K part `part` of its rows, steps part * STEPS / KS on, and
// emit gets that part's sums (the caller adds the parts).
template <int NTILE, int PF, int RING, int TILE, bool DIRECT, bool BIAS, int XB, int TMA, class Rows, class Emit, class StageRows, int KS = 1>
__device__ __forceinline__ void moe_stream_tiles_mma(int n_tiles, const uint4* xs, const float4* bias, uint4* wbuf, int nt, Rows t,
                                                     Emit emit, StageRows stage_rows, int part = 0) {
  constexpr int G = Rows::K_DIM / 32, MT = Rows::NR / 16;
  constexpr int SUBS = MT == 1 ? 2 : 1;
  constexpr int STEPS = (G + SUBS * kMoeMmaSub - 1) / (SUBS * kMoeMmaSub);
  static_assert(Rows::NR % 16 == 0, "MMA m-tiles of 16 rows");
  static_assert(RING == 0 || (MT == 1 && G % 8 == 0), "RING: one m-tile a warp, rows of whole steps (256 columns)");
  static_assert(Rows::W_LAYOUT == 0 || G % kMoeMmaSub == 0, "W_LAYOUT 1: whole sub-blocks");
  static_assert(TMA == 0 || (RING >= 2 && Rows::W_LAYOUT == 1), "TMA: the int4_frag shared-memory ring's copies by the copy engine");
  static_assert(KS == 1 || (TMA == 1 && STEPS % KS == 0), "KS: the copy engine's ring over whole K parts");
  constexpr int PART_STEPS = STEPS / KS;
  const int first0 = t.first;
  auto rows_of = [&](int tile) {
    Rows r = t;
    r.first = first0 + tile * TILE;
    return r;
  };
  float acc[MT][NTILE][4];
  auto zero = [&] {
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int n = 0; n < NTILE; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][n][e] = 0.f;
  };
  auto emit_tile = [&](int tile) {
    emit(tile, acc);
    zero();
  };
  zero();
  if constexpr (TMA == 0) stage_rows();
  if constexpr (RING >= 2) {
    uint4* ring = wbuf + RING * kMoeRingStage * (threadIdx.x / 32);  // the warp's stages
    if constexpr (TMA == 1) {
      constexpr int WARPS = KS * TILE / Rows::WARP_ROWS;  // the barriers follow every warp's stages
      unsigned long long* bars = reinterpret_cast<unsigned long long*>(wbuf + WARPS * RING * kMoeRingStage) + RING * (threadIdx.x / 32);
      const int step0 = part * PART_STEPS;
      moe_bulk_ring_stream<RING, PART_STEPS>(
          n_tiles, ring, bars, [&](int tile) { return moe_bulk_tile(rows_of(tile), step0); }, stage_rows,
          [&](const uint4* stage, int c) { moe_frag_ring_math<NTILE, G, BIAS, XB, true>(stage, step0 + c, xs, bias, nt, acc); }, emit_tile);
    } else if constexpr (Rows::W_LAYOUT == 1) {
      moe_smem_ring_stream<RING, STEPS>(
          n_tiles, ring, [&](int tile) { return moe_frag_tile(rows_of(tile)); },
          [](const MoeFragTile& f, int c, uint4* stage) { moe_frag_ring_issue(f, c, stage); },
          [&](const uint4* stage, int c) { moe_frag_ring_math<NTILE, G, BIAS, XB>(stage, c, xs, bias, nt, acc); }, emit_tile);
    } else {
      moe_smem_ring_stream<RING, STEPS>(
          n_tiles, ring, rows_of, [](const Rows& r, int c, uint4* stage) { moe_ring_issue(r, c, stage); },
          [&](const uint4* stage, int c) { moe_ring_math<NTILE, G, BIAS, XB>(stage, c, xs, bias, nt, acc); }, emit_tile);
    }
  } else {
    // MMA 2: each lane loads its rows' scales (8 registers a step); MMA 1: the quad shares them by
    // shuffles (2 registers: K2.6's down keeps two blocks an SM under 128 registers).
    using Loads = typename MoeIf<DIRECT, MoeMmaLoads<MT, SUBS>, MoeMmaLoadsShfl<MT, SUBS>>::type;
    uint4* tb = wbuf + 2 * 64 * (threadIdx.x / 32);  // the warp's two transposition buffers (16 rows x 4 groups)
    unsigned flip = 0;
    moe_ring_stream<PF, STEPS, Loads>(
        n_tiles, [&](Loads& L, int tile, int c) { moe_mma_load<MT, SUBS>(rows_of(tile), c, L); },
        [&](const Loads& L, int, int c) { moe_mma_math<MT, SUBS, NTILE, G, BIAS, Rows::W_LAYOUT == 1, XB>(L, c, xs, bias, nt, tb, flip, acc); }, emit_tile);
  }
}

// The warps' rings (RING >= 2) in dynamic shared memory: past the staged rows (and MMA 3, 4's C
// fragments), where families/moe_grouped.cc's moe_smem_bytes counts them.
template <int K, int NT, int MMA, int XB>
__device__ __forceinline__ uint4* moe_ring_buffers(uint4* xm) {
  constexpr int staged = NT * ((K + kMoeChunk - 1) / kMoeChunk) * kMoeChunk * (XB ? 2 : 4) + (MMA >= 3 ? K / 32 * ((NT + 7) / 8) * 64 : 0);
  return xm + staged / 16;
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

// MMA 1: the chunk's nt <= 8 * NTILE pairs as the n-tiles' columns (tokens past nt read the
// last one's row; their columns are dropped).
// KS > 1: the block's warps are KS groups of WARPS / KS, group p summing K part p of the same
// rows (moe_stream_tiles_mma's part); at each tile's end parts 1.. hand their sums to part 0
// through shared memory (added in part order) and part 0 emits.
template <int H, int I, int E, int TOPK, int X_DT, int WARPS, int ROWS, int NT, int PF, int RING, int NTILE, bool DIRECT, bool BIAS,
          int W_LAYOUT, int XB, int TMA, int KS = 1>
__device__ __forceinline__ void moe_gate_up_chunk_mma(const MoeGroup<E, TOPK, NT>& g, const void* x, const void* w_gate,
                                                      const void* w_gate_scale, const void* w_up, const void* w_up_scale, void* h,
                                                      int x_row_stride, uint4* xs, uint4* wbuf, i64* rows) {
  constexpr int RW = WARPS / KS;  // warps a tile's rows are dealt over
  constexpr int TILE = RW * ROWS, MT = ROWS / 8;
  const int nt = g.count;
  auto stage_rows = [&] {
    if (static_cast<int>(threadIdx.x) < nt) rows[threadIdx.x] = static_cast<i64>(g.pairs[threadIdx.x] / TOPK) * x_row_stride;
    __syncthreads();  // rows[] written; the previous chunk's activations are no longer read
    moe_stage_mma<H, X_DT, WARPS * 32, BIAS, NT, NTILE, XB>(xs, x, rows, nt);
    __syncthreads();
  };
  const int warp = threadIdx.x / 32 % RW, part = threadIdx.x / 32 / RW, lane = threadIdx.x % 32;
  MoeTileRows<H, 1, 2, ROWS, I % TILE == 0, W_LAYOUT> t{{w_gate, w_up},
                               {static_cast<const unsigned short*>(w_gate_scale), static_cast<const unsigned short*>(w_up_scale)},
                               static_cast<i64>(g.expert) * I, warp * ROWS, I};
  __shared__ float4 parts[KS > 1 ? (KS - 1) * RW * MT * NTILE * 32 : 1];  // parts 1..'s D fragments, a tile at a time
  auto emit = [&](int tile, const float (&part_acc)[MT][NTILE][4]) {
    float acc[MT][NTILE][4];
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int n = 0; n < NTILE; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][n][e] = part_acc[j][n][e];
    if constexpr (KS > 1) {  // every warp of the block emits the same tiles: block barriers are safe
      auto slot = [&](int p, int j, int n) { return parts + (((p - 1) * RW + warp) * MT * NTILE + j * NTILE + n) * 32 + lane; };
      if (part > 0)
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
          for (int n = 0; n < NTILE; ++n) *slot(part, j, n) = float4{acc[j][n][0], acc[j][n][1], acc[j][n][2], acc[j][n][3]};
      __syncthreads();
      if (part == 0)
        for (int p = 1; p < KS; ++p)
#pragma unroll
          for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int n = 0; n < NTILE; ++n) {
              const float4 v = *slot(p, j, n);
              acc[j][n][0] += v.x, acc[j][n][1] += v.y, acc[j][n][2] += v.z, acc[j][n][3] += v.w;
            }
      __syncthreads();  // read before the next tile's parts are written
      if (part > 0) return;
    }
    const int i0 = tile * TILE + warp * ROWS;
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      const int i = i0 + 8 * j + lane / 4;  // D rows g (gate) and g + 8 (up): the same row i
      if (i >= I) continue;
#pragma unroll
      for (int n = 0; n < NTILE; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * n + 2 * (lane % 4) + e;
          if (c < nt) static_cast<float*>(h)[static_cast<i64>(g.pairs[c]) * I + i] = silu(acc[j][n][e]) * acc[j][n][2 + e];
        }
    }
  };
  const float4* bias = reinterpret_cast<const float4*>(xs + moe_mma_bias_offset<H, XB>(NT));
  moe_stream_tiles_mma<NTILE, PF, RING, TILE, DIRECT, BIAS, XB, TMA, decltype(t), decltype(emit), decltype(stage_rows), KS>(
      (I + TILE - 1) / TILE, xs, bias, wbuf, nt, t, emit, stage_rows, part);
}

// ROUTE > 0: the block routes the step's n_tokens <= ROUTE tokens itself (moe_router.cuh's
// moe_route_token, a warp a token, ungrouped: N_GROUP 1, RNORM its norm_topk_prob) into shared
// memory, and block (0, 0, 0) writes the ids and weights for the down projection; every block
// computes the same ids from the same logits, so no block waits for another. A launch whose
// logits argument is its topk_ids was routed by the logits' launch (matmul_siblings.cuh ROUTE_K)
// at this step: it reads the ids as written.
// WRITE false (the prefetch prologue's guess): no block writes.
template <int E, int TOPK, int ROUTE, int RNORM, int WARPS, bool WRITE = true>
__device__ __forceinline__ const int* moe_route_step(void* topk_ids, const void* logits, const void* bias, void* topk_weights,
                                                     int n_tokens, float routed_scaling, int* route_ids) {
  if constexpr (ROUTE == 0) {
    return static_cast<const int*>(topk_ids);
  } else {
    if (logits == topk_ids) return static_cast<const int*>(topk_ids);  // routed by the logits' launch
    const bool writer = WRITE && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int t = warp; t < n_tokens && t < ROUTE; t += WARPS) {
      int ids[TOPK];
      float w[TOPK];
      moe_route_token<E, TOPK, 1, 1, RNORM>(static_cast<const float*>(logits) + static_cast<i64>(t) * E, static_cast<const float*>(bias),
                                            nullptr, routed_scaling, ids, w);
      if (lane == 0) {
#pragma unroll
        for (int k = 0; k < TOPK; ++k) {
          route_ids[t * TOPK + k] = ids[k];
          if (writer) {
            static_cast<int*>(topk_ids)[static_cast<i64>(t) * TOPK + k] = ids[k];
            static_cast<float*>(topk_weights)[static_cast<i64>(t) * TOPK + k] = w[k];
          }
        }
      }
    }
    __syncthreads();
    return route_ids;
  }
}

// GPF > 0 (W_LAYOUT 1): this warp asks L2 for the first GPF KiB of the int4_frag words of its
// OCTETS octets from stacked row `row` on (K columns: contiguous, octet-major) and the matching
// share of their scales, in 4 KiB pieces over the lanes (cp.async.bulk.prefetch.L2: a hint that
// holds no registers).
template <int K, int OCTETS, int GPF>
__device__ __forceinline__ void moe_prefetch_octets(const void* w, const void* scale, i64 row) {
  const char* words = reinterpret_cast<const char*>(static_cast<const unsigned*>(w) + kplan::int4_frag::sub_block_words(row, 0, K));
  const char* scales = reinterpret_cast<const char*>(static_cast<const unsigned short*>(scale) + kplan::int4_frag::sub_block_scales(row, 0, K));
  const i64 word_bytes = min(static_cast<i64>(GPF) * 1024, static_cast<i64>(OCTETS) * (K / 128) * 512);
  const i64 scale_bytes = word_bytes / 8;  // 64 bytes of scales a 512-byte sub-block
  l2_prefetch_warp(words, word_bytes);
  if (threadIdx.x % 32 == 0) l2_prefetch_bulk(scales, static_cast<unsigned>(scale_bytes));
}

// The gate/up entry's prologue (GPF > 0, W_LAYOUT 1, KS 0 / 1; run before kp::grid_dependency_begin,
// while the launch before it still runs): the block routes the step from the router's logits as
// they stand (ROUTE; else reads topk_ids so), finds its expert as the kernel will, and each warp
// asks L2 for the first GPF KiB of its first tile's gate and up octets. A guess, so it writes
// nothing: logits read before the wait may be a step's before (the router's rows are written in
// the first wave of the launch before, tens of microseconds ahead, so they are this step's when
// the blocks become resident at its tail); a wrong guess fetches bytes for nothing, and every
// load the kernel computes with comes after the wait.
template <int H, int I, int E, int TOPK, int W_FMT, int X_DT, int WARPS, int ROWS, int NT, int PF, int BLOCKS, int MMA, int RING, int ROUTE,
          int RNORM, int W_LAYOUT = 0, int XB = 0, int TMA = 0, int KS = 0, int GPF = 0>
__device__ void moe_grouped_gate_up_prefetch(const void*, void* topk_ids, const void* w_gate, const void* w_gate_scale, const void* w_up,
                                             const void* w_up_scale, void*, int n_tokens, int, const void* logits, const void* bias,
                                             void* topk_weights, float routed_scaling) {
  if constexpr (GPF > 0 && W_LAYOUT == 1 && KS <= 1) {
    __shared__ MoeGroup<E, TOPK, NT> g;
    __shared__ int route_ids[ROUTE > 0 ? ROUTE * TOPK : 1];
    const int* ids = moe_route_step<E, TOPK, ROUTE, RNORM, WARPS, false>(topk_ids, logits, bias, topk_weights, n_tokens, routed_scaling, route_ids);
    moe_find_group<E, TOPK, NT, WARPS * 32>(g, ids, n_tokens * TOPK, blockIdx.y);
    const int row = static_cast<int>(blockIdx.x) * WARPS * ROWS + static_cast<int>(threadIdx.x / 32) * ROWS;  // the warp's first tile
    if (g.expert < 0 || row >= I) return;
    const i64 r = static_cast<i64>(g.expert) * I + row;
    moe_prefetch_octets<H, ROWS / 8, GPF>(w_gate, w_gate_scale, r);
    moe_prefetch_octets<H, ROWS / 8, GPF>(w_up, w_up_scale, r);
  }
}

template <int H, int I, int E, int TOPK, int W_FMT, int X_DT, int WARPS, int ROWS, int NT, int PF, int BLOCKS, int MMA, int RING, int ROUTE,
          int RNORM, int W_LAYOUT = 0, int XB = 0, int TMA = 0, int KS = 0, int GPF = 0>
__device__ void moe_grouped_gate_up(const void* x, void* topk_ids, const void* w_gate, const void* w_gate_scale, const void* w_up,
                                    const void* w_up_scale, void* h, int n_tokens, int x_row_stride, const void* logits, const void* bias,
                                    void* topk_weights, float routed_scaling) {
  static_assert(NT >= 1 && NT <= (MMA ? 16 : 8), "NT pairs per chunk: 1..8 (MMA: 1..16)");
  static_assert(W_FMT == 0 || H % 32 == 0, "INT4 rows hold whole groups of 32");
  static_assert(MMA == 0 || (W_FMT == 1 && ROWS % 8 == 0), "MMA: INT4, ROWS a multiple of 8 (8 gate + 8 up rows an m-tile)");
  static_assert(RING == 0 || (MMA >= 1 && ROWS == 8 && H % 256 == 0), "RING: MMA, one m-tile a warp, rows of whole 256-column steps");
  static_assert(ROUTE >= 0 && ROUTE <= 64 && E <= 1024, "ROUTE: at most 64 tokens routed in the launch");
  static_assert(W_LAYOUT == 0 || (MMA >= 1 && I % 8 == 0 && H % 128 == 0),
                "W_LAYOUT 1: the tensor-core path over whole octets and 128-column sub-blocks");
  static_assert(XB == 0 || MMA >= 1, "XB 1 (activations rounded to bf16 once staged) is the tensor-core path's");
  constexpr int KSN = KS > 1 ? KS : 1;  // K parts (KS 0 and 1: one)
  static_assert(TMA == 0 || (RING >= 2 && W_LAYOUT == 1 && I % (WARPS / KSN * ROWS) == 0),
                "TMA: the int4_frag ring (RING >= 2, W_LAYOUT 1) over whole row tiles");
  static_assert(KS == 0 || KS == 1 || KS == 2 || KS == 4, "KS (K parts a tile's rows are split into): 0 or 1 (none), 2, 4");
  static_assert(KSN == 1 || (TMA == 1 && WARPS % KS == 0 && H / 256 % KS == 0), "KS: TMA 1, WARPS and the steps dealt evenly over the parts");
  __shared__ MoeGroup<E, TOPK, NT> g;
  __shared__ i64 rows[NT];
  __shared__ int route_ids[ROUTE > 0 ? ROUTE * TOPK : 1];
  float4* xs = static_cast<float4*>(dynamic_smem());  // NT staged rows of H (the launch's smem_bytes)
  const int* ids = moe_route_step<E, TOPK, ROUTE, RNORM, WARPS>(topk_ids, logits, bias, topk_weights, n_tokens, routed_scaling, route_ids);
  const int n_pairs = n_tokens * TOPK;
  moe_find_group<E, TOPK, NT, WARPS * 32>(g, ids, n_pairs, blockIdx.y);
  if (g.expert < 0) return;
  for (int chunk = 0;; ++chunk) {
    moe_next_pairs<E, TOPK, NT, WARPS * 32>(g, ids, n_pairs);
    const int nt = g.count;
    if (nt == 0) return;
    if (chunk % static_cast<int>(gridDim.z) != static_cast<int>(blockIdx.z)) continue;  // another block's pair chunk
    if constexpr (MMA >= 1) {
      uint4* xm = static_cast<uint4*>(dynamic_smem());  // the staged hi / lo words (moe_stage_mma)
      __shared__ uint4 tbuf[RING >= 2 || W_LAYOUT == 1 ? 1 : WARPS * 2 * 64];  // per warp two 1 KiB transposition buffers (none: RING, W_LAYOUT 1)
      uint4* wbuf = RING >= 2 ? moe_ring_buffers<H, NT, MMA, XB>(xm) : tbuf;
      if (nt <= 8) {
        moe_gate_up_chunk_mma<H, I, E, TOPK, X_DT, WARPS, ROWS, NT, PF, RING, 1, MMA == 2 || MMA == 3, MMA >= 3, W_LAYOUT, XB, TMA, KSN>(g, x, w_gate, w_gate_scale, w_up, w_up_scale, h, x_row_stride, xm, wbuf, rows);
      } else if constexpr (NT > 8) {
        moe_gate_up_chunk_mma<H, I, E, TOPK, X_DT, WARPS, ROWS, NT, PF, RING, 2, MMA == 2 || MMA == 3, MMA >= 3, W_LAYOUT, XB, TMA, KSN>(g, x, w_gate, w_gate_scale, w_up, w_up_scale, h, x_row_stride, xm, wbuf, rows);
      }
      continue;
    } else {
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

template <int H, int I, int E, int TOPK, int WARPS, int ROWS, int NT, int PF, int RING, int NTILE, bool DIRECT, bool BIAS,
          int W_LAYOUT, int XB, int TMA>
__device__ __forceinline__ void moe_down_chunk_mma(const MoeGroup<E, TOPK, NT>& g, const void* h, const void* topk_weights,
                                                   const void* w_down, const void* w_down_scale, void* partial, uint4* xs, uint4* wbuf,
                                                   i64* rows) {
  constexpr int TILE = WARPS * ROWS, MT = ROWS / 16;
  const int nt = g.count;
  auto stage_rows = [&] {
    if (static_cast<int>(threadIdx.x) < nt) rows[threadIdx.x] = static_cast<i64>(g.pairs[threadIdx.x]) * I;
    __syncthreads();
    moe_stage_mma<I, F32, WARPS * 32, BIAS, NT, NTILE, XB>(xs, h, rows, nt);
    __syncthreads();
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  MoeTileRows<I, 1, 1, ROWS, H % TILE == 0, W_LAYOUT> t{{w_down}, {static_cast<const unsigned short*>(w_down_scale)}, static_cast<i64>(g.expert) * H, warp * ROWS, H};
  // The routing weights of this lane's D columns, read once a chunk: a global load in the emit
  // shares the register ring's scoreboard, so its use would wait for every step in flight.
  float wts[NTILE][2];
#pragma unroll
  for (int n = 0; n < NTILE; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 8 * n + 2 * (lane % 4) + e;
      wts[n][e] = c < nt ? static_cast<const float*>(topk_weights)[g.pairs[c]] : 0.f;
    }
  auto emit = [&](int tile, const float (&acc)[MT][NTILE][4]) {
    const int j0 = tile * TILE + warp * ROWS;
#pragma unroll
    for (int n = 0; n < NTILE; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * n + 2 * (lane % 4) + e;
        if (c >= nt) continue;
        const int p = g.pairs[c];
        const float wt = wts[n][e];
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int row = j0 + 16 * j + lane / 4 + 8 * hh;
            if (row < H) static_cast<float*>(partial)[static_cast<i64>(p) * H + row] = wt * acc[j][n][2 * hh + e];
          }
      }
  };
  const float4* bias = reinterpret_cast<const float4*>(xs + moe_mma_bias_offset<I, XB>(NT));
  moe_stream_tiles_mma<NTILE, PF, RING, TILE, DIRECT, BIAS, XB, TMA>((H + TILE - 1) / TILE, xs, bias, wbuf, nt, t, emit, stage_rows);
}

// The down entry's prologue (GPF > 0, W_LAYOUT 1; before kp::grid_dependency_begin): the block
// finds its expert from topk_ids as they stand -- the gate/up launch wrote them right after its
// routing, long before it ends -- and each warp asks L2 for the first GPF KiB of its first
// tile's octets; a guess, as gate/up's prologue (above).
template <int H, int I, int E, int TOPK, int W_FMT, int WARPS, int ROWS, int NT, int PF, int BLOCKS, int MMA, int RING, int W_LAYOUT = 0,
          int XB = 0, int TMA = 0, int GPF = 0>
__device__ void moe_grouped_down_prefetch(const void*, const void* topk_ids, const void*, const void* w_down, const void* w_down_scale,
                                          void*, int n_tokens) {
  if constexpr (GPF > 0 && W_LAYOUT == 1) {
    __shared__ MoeGroup<E, TOPK, NT> g;
    moe_find_group<E, TOPK, NT, WARPS * 32>(g, static_cast<const int*>(topk_ids), n_tokens * TOPK, blockIdx.y);
    const int row = static_cast<int>(blockIdx.x) * WARPS * ROWS + static_cast<int>(threadIdx.x / 32) * ROWS;
    if (g.expert < 0 || row >= H) return;
    moe_prefetch_octets<I, ROWS / 8, GPF>(w_down, w_down_scale, static_cast<i64>(g.expert) * H + row);
  }
}

template <int H, int I, int E, int TOPK, int W_FMT, int WARPS, int ROWS, int NT, int PF, int BLOCKS, int MMA, int RING, int W_LAYOUT = 0,
          int XB = 0, int TMA = 0, int GPF = 0>
__device__ void moe_grouped_down(const void* h, const void* topk_ids, const void* topk_weights, const void* w_down,
                                 const void* w_down_scale, void* partial, int n_tokens) {
  static_assert(NT >= 1 && NT <= (MMA ? 16 : 8), "NT pairs per chunk: 1..8 (MMA: 1..16)");
  static_assert(W_FMT == 0 || I % 32 == 0, "INT4 rows hold whole groups of 32");
  static_assert(MMA == 0 || (W_FMT == 1 && ROWS % 16 == 0), "MMA: INT4, ROWS a multiple of 16 (an m-tile)");
  static_assert(RING == 0 || (MMA >= 1 && ROWS == 16 && I % 256 == 0), "RING: MMA, one m-tile a warp, rows of whole 256-column steps");
  static_assert(W_LAYOUT == 0 || (MMA >= 1 && H % 8 == 0 && I % 128 == 0),
                "W_LAYOUT 1: the tensor-core path over whole octets and 128-column sub-blocks");
  static_assert(XB == 0 || MMA >= 1, "XB 1 (activations rounded to bf16 once staged) is the tensor-core path's");
  static_assert(TMA == 0 || (RING >= 2 && W_LAYOUT == 1 && H % (WARPS * ROWS) == 0),
                "TMA: the int4_frag ring (RING >= 2, W_LAYOUT 1) over whole row tiles");
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
    if constexpr (MMA >= 1) {
      uint4* xm = static_cast<uint4*>(dynamic_smem());  // the staged hi / lo words (moe_stage_mma)
      __shared__ uint4 tbuf[RING >= 2 || W_LAYOUT == 1 ? 1 : WARPS * 2 * 64];  // per warp two 1 KiB transposition buffers (none: RING, W_LAYOUT 1)
      uint4* wbuf = RING >= 2 ? moe_ring_buffers<I, NT, MMA, XB>(xm) : tbuf;
      if (nt <= 8) {
        moe_down_chunk_mma<H, I, E, TOPK, WARPS, ROWS, NT, PF, RING, 1, MMA == 2 || MMA == 3, MMA >= 3, W_LAYOUT, XB, TMA>(g, h, topk_weights, w_down, w_down_scale, partial, xm, wbuf, rows);
      } else if constexpr (NT > 8) {
        moe_down_chunk_mma<H, I, E, TOPK, WARPS, ROWS, NT, PF, RING, 2, MMA == 2 || MMA == 3, MMA >= 3, W_LAYOUT, XB, TMA>(g, h, topk_weights, w_down, w_down_scale, partial, xm, wbuf, rows);
      }
      continue;
    } else {
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
}

template <int H, int TOPK, int Y_DT, int ACC, int THREADS>
__device__ void moe_combine(const void* partial, void* out, const void* residual, int n_tokens, int out_row_stride) {
  const int j = blockIdx.x * THREADS + threadIdx.x;
  const int t = blockIdx.y;
  if (j >= H || t >= n_tokens) return;
  const float* p = static_cast<const float*>(partial) + static_cast<i64>(t) * TOPK * H + j;
  float total = 0.f;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) total += p[static_cast<i64>(k) * H];
  const i64 o = static_cast<i64>(t) * out_row_stride + j;
  store<Y_DT>(out, o, ACC ? load<Y_DT>(residual, o) + total : total);
}

}  // namespace kp
