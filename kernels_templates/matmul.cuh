#pragma once
// Dense matmul with bf16 weights, f32 accumulation, for the small token counts of decode and
// tree verify (and prefill chunks, by tiling tokens):
//   y[b, t, n] = (ACC ? residual[b, t, n] : 0) + (ROUTED ? sum_r routed[t * ROUTED + r, n] : 0) + sum_k x[b, t, k] * W[b](n, k)
// W_LAYOUT 0: W[b] is bf16 [N, K] row-major (nn.Linear's weight): the bandwidth path below.
// W_LAYOUT 1: W[b] is bf16 [K, N] row-major (e.g. absorbed MLA W_UK per head): a column stream.
// Batches (heads of OPS head_matmul) sit w_batch_stride elements apart in W; with W_LAYOUT 1 a
// transposed weight view (the absorbed W_UK) needs no copy.
//
// The W_LAYOUT 0 path is a weight stream: at 1..8 tokens a step does 1..8 FMAs per weight byte
// pair, so the kernel is bound by how many bytes of W it keeps in flight. Design:
//   - A warp owns RPW consecutive rows and a 1/KSPLIT share of K; each lane issues RPW * UNROLL
//     16-byte weight loads (ld.global.nc.L1::no_allocate: W is read once, it must not evict x
//     from L1) before any math, so 32 * RPW * UNROLL * 16 bytes per warp are in flight.
//   - KSPLIT warps of a block share the same rows and split K between them (interleaved by
//     16-byte chunk); their partial sums meet in shared memory and are added in warp order (the
//     result is deterministic). This is the split-K of small N (kv_a's 576 rows at K 7168 are
//     576 warps without it, too few for 132 SMs); no second launch is needed.
//   - x is read through L1 (vector loads when x and its row stride are 16-byte aligned) and each
//     x value feeds RPW rows from registers; a TOK_TILE of tokens shares every weight load.
//   - Token tiles are blockIdx.x, the fastest-varying grid index: the tiles of one row block run
//     side by side, so a step of up to 64 tokens reads each weight row from HBM about once (the
//     tiles after the first find it in L2).
//   - MMA 1 (the instances the op rule takes past the rows-as-M steps, 33+ tokens by default):
//     the same rows, K split and epilogue on the tensor cores,
//     mma.sync m16n8k16 with the rows as its N (8 per n-tile, RPW / 8 of them) and TOK_TILE
//     tokens as its M (16 per m-tile), f32 x split into bf16 hi + lo (two MMAs, so results stay
//     within f32 summation-order differences of the CPU op); see kp::matmul_rows_mma. Not yet:
//     x staged once per block in shared memory (today every row group of a block reads it
//     through L1), cp.async / TMA weight pipelines, wgmma on sm_90.
//   - MMA 2 (the steps of 4..32 tokens by default, where 8 FMAs a weight per 2-token tile bind
//     the CUDA cores and MMA 1's m16 pads the tokens): the rows as mma's M (16 per m-tile, RPW / 16
//     of them) and TOK_TILE tokens as its N (8 per n-tile): every x fragment feeds RPW / 16 MMAs,
//     NORM works as on the CUDA cores (the squares taken from the same x loads); see
//     kp::matmul_rows_mma_m, which kp::matmul_siblings streams through too. The op rule's step
//     ranges: compiler/passes/op_rules.cc dense_matmul_path.
// The W_LAYOUT 1 path streams W's rows k along N: lane l of a warp owns RPW chunks of 8 columns
// (chunk c: columns base + (32 c + l) * 8 .. + 8, one coalesced 512-byte run per chunk and k), the
// KSPLIT warps of a column group split the k rows (warp s: k = s, s + KSPLIT, ...), each lane
// keeping UNROLL k rows' 16-byte loads in flight, and the slices' partial sums meet in shared
// memory, added in slice order. (At K2.6's W_UK, 64 heads of [128, 512]: 8 warps of 16 k rows
// each per head, against one thread per column and 128 serial 2-byte loads before.) N not a
// multiple of 8 or an unaligned view takes a scalar path over the same columns: one thread per
// column, all of K.
// Rows past N are clamped for the loads (no predicated loads) and never stored. K not a multiple
// of 8, or a weight view that is not 16-byte aligned, takes a scalar path with the same split.
//
// Template parameters:
//   K, N      reduction and output dims
//   X_DT      element type of x (kp::F32 / kp::BF16)
//   Y_DT      element type of y
//   W_LAYOUT  0 = [N, K], 1 = [K, N]
//   ACC       1: add residual (a fused residual add: compiler/passes/epilogue_adds.h); 0: overwrite y
//   ROUTED    > 0 (with ACC 1, W_LAYOUT 0, one batch): a MoE layer's combine in its shared expert's
//             down projection: the routed experts' ROUTED per-pair rows of each token
//             (moe_grouped_down's partial rows, routing weights applied) are summed in pair order
//             and added to the product before the residual, y = residual + (routed + x W^T), the
//             order of the IR's two adds; no moe_combine launch. 0: none
//   NORM      1: x is read as rms_norm(x, norm_weight, eps) (a fused norm: compiler/passes/norm_matmuls.h):
//             each x value is scaled by its norm weight as it is loaded, the warps of a row group
//             add up each token's sum of squares over their k-slices (which cover K once) beside
//             the dot products, and the epilogue scales each sum by 1 / sqrt(mean + eps): no norm
//             launch, the normalised row never stored. 2: as 1, and the blocks of row block 0 also
//             write the norm's result rows (in X_DT) to norm_out for its other readers. 0: x as
//             is. 3: x is rms_norm(x) as the norm launch of 32 * WARPS threads stores it in bf16:
//             each block first normalises its tokens' rows into dynamic shared memory with
//             rms_norm.cuh's own row (its loads, sum of squares and rounding: bit for bit that
//             launch's result), then streams them as NORM 0 bf16 rows (compiler/passes/norm_matmuls.h's
//             exact folds: the weights' bytes and the step's results unchanged, one launch fewer).
//             NORM needs W_LAYOUT 0 and MMA 0 or 2
//   WARPS     warps per block
//   TOK_TILE  tokens handled per block (each weight load is reused TOK_TILE times)
//   RPW       W_LAYOUT 0: rows per warp (each x load reused RPW times); 1: chunks of 8 columns per lane
//   KSPLIT    warps of a block sharing rows (W_LAYOUT 1: columns), splitting K (divides WARPS)
//   UNROLL    W_LAYOUT 0: 16-byte weight loads in flight per lane and row; 1: k rows in flight per lane
//   MMA       W_LAYOUT 0: 1 = tensor cores, tokens as M (RPW a multiple of 8, TOK_TILE of 16 .. 64,
//             K % 8 == 0), 2 = tensor cores, rows as M (RPW a multiple of 16, TOK_TILE of 8 .. 32,
//             K % 8 == 0), 0 = CUDA cores; 0 for W_LAYOUT 1
//   XPF       MMA 2: 1 loads a round's x fragments (UNROLL k-chunks, every n-tile) beside its
//             weights, before the round's MMAs (UNROLL * TOK_TILE / 8 * 8 more registers a lane),
//             where 0 loads each chunk's as its MMAs come (an L2 round trip each, in order); 0 otherwise
//   PREFETCH  KiB from the start of W (W_LAYOUT 0: of each batch; 1: of all batches together) that
//             the blocks holding them ask L2 for before they wait on the kernel before this one
//             (kp::matmul_prefetch, the family's prologue); 0: none
// Launch (compiler/codegen/families/matmul.cc):
//   W_LAYOUT 0: grid (ceil(n_tokens / TOK_TILE), ceil(N / (RPW * WARPS / KSPLIT)), batch), block (32 * WARPS)
//   W_LAYOUT 1: grid (ceil(n_tokens / TOK_TILE), ceil(N / (256 * RPW * WARPS / KSPLIT)), batch), block (32 * WARPS)
// Arguments:
//   x               X_DT; element (b, t, k) at b * x_batch_stride + t * x_row_stride + k
//   w               bf16, batch b at b * w_batch_stride
//   y               Y_DT; element (b, t, n) at b * y_batch_stride + t * y_row_stride + n
//   residual        Y_DT in y's layout, read by ACC 1 (may be y: each element is read, then
//                   written, by one thread); unread by ACC 0
//   n_tokens        tokens (rows of x) in this step
//   x_row_stride, x_batch_stride, y_row_stride, y_batch_stride, w_batch_stride   in elements
//   norm_weight     NORM: bf16 [K], the norm's weight; unread by NORM 0
//   norm_out        NORM 2: X_DT [n_tokens, K], the norm's result; unwritten otherwise
//   eps             NORM: added to the mean square
//   routed          ROUTED: f32 [n_tokens * ROUTED, N], pair (t, r) at row t * ROUTED + r; unread by 0
#include "rms_norm.cuh"  // rms_norm_row (NORM 3)
#include "weight_dot.cuh"

namespace kp {

// One warp's share of the W_LAYOUT 0 path: partial sums acc[r][t] (this lane's) of rows
// row[0..RPW) over its k-slice, for tokens t < nt. VEC: 16-byte weight (and x) loads.
// NORM 1 (x read as rms_norm(x, g)): each x value is multiplied by its norm weight g[k] before the
// dot products, and its square is added into ss[t] (this lane's share of the token's sum of
// squares; the caller scales the row's sums by 1 / sqrt(mean + eps), kp::rms_inverse). XVEC
// covers g's 16-byte loads too.
template <int K, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, bool VEC, bool XVEC, int NORM = 0>
__device__ __forceinline__ void matmul_rows(const unsigned short* const (&wrow)[RPW], const void* x, int x_row_stride, int nt,
                                            int slice, float (&acc)[RPW][TOK_TILE], const void* g, float (&ss)[TOK_TILE]) {
  const int lane = threadIdx.x % 32;
  if constexpr (VEC) {
    constexpr int CH = K / 8;            // 16-byte chunks per row
    constexpr int STEP = 32 * KSPLIT;    // chunk distance between a lane's loads
    for (int c0 = lane + 32 * slice; c0 < CH; c0 += STEP * UNROLL) {
      uint4 wv[RPW][UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int c = c0 + u * STEP;
#pragma unroll
        for (int r = 0; r < RPW; ++r) wv[r][u] = c < CH ? ldg_stream16(wrow[r] + 8 * c) : zero_uint4();
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int c = c0 + u * STEP;
        if (c < CH) {
          float wf[RPW][8];
#pragma unroll
          for (int r = 0; r < RPW; ++r) unpack8_bf16(wv[r][u], wf[r]);
          float gv[8];
          if constexpr (NORM != 0) load8_x<BF16, XVEC>(g, 8 * c, gv);
#pragma unroll
          for (int t = 0; t < TOK_TILE; ++t) {
            if (t < nt) {
              float xv[8];
              load8_x<X_DT, XVEC>(x, static_cast<i64>(t) * x_row_stride + 8 * c, xv);
              if constexpr (NORM != 0) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                  ss[t] = fmaf(xv[j], xv[j], ss[t]);
                  xv[j] *= gv[j];
                }
              }
#pragma unroll
              for (int r = 0; r < RPW; ++r) {
                float s = acc[r][t];
#pragma unroll
                for (int j = 0; j < 8; ++j) s = fmaf(wf[r][j], xv[j], s);
                acc[r][t] = s;
              }
            }
          }
        }
      }
    }
  } else {
    for (int k = lane + 32 * slice; k < K; k += 32 * KSPLIT) {
      float wf[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r) wf[r] = load<BF16>(wrow[r], k);
      const float gk = NORM != 0 ? load<BF16>(g, k) : 1.f;
#pragma unroll
      for (int t = 0; t < TOK_TILE; ++t) {
        if (t < nt) {
          float xv = load<X_DT>(x, static_cast<i64>(t) * x_row_stride + k);
          if constexpr (NORM != 0) {
            ss[t] = fmaf(xv, xv, ss[t]);
            xv *= gk;
          }
#pragma unroll
          for (int r = 0; r < RPW; ++r) acc[r][t] = fmaf(wf[r], xv, acc[r][t]);
        }
      }
    }
  }
}

// Eight bf16 weights from w (16-byte aligned when VEC) as one 16-byte word.
template <bool VEC>
__device__ __forceinline__ uint4 load_w8(const unsigned short* w) {
  if constexpr (VEC) {
    return ldg_stream16(w);
  } else {
    uint4 v;
    v.x = w[0] | (static_cast<unsigned>(w[1]) << 16);
    v.y = w[2] | (static_cast<unsigned>(w[3]) << 16);
    v.z = w[4] | (static_cast<unsigned>(w[5]) << 16);
    v.w = w[6] | (static_cast<unsigned>(w[7]) << 16);
    return v;
  }
}

// The tensor-core share of one warp (MMA instances): rows n0 .. n0 + RPW of W (RPW / 8 n-tiles
// of mma.m16n8k16, the rows as its N) against TOK_TILE tokens (TOK_TILE / 16 m-tiles, the tokens
// as its M), over the 32-wide k-chunks slice, slice + KSPLIT, ... Lane (g = lane / 4, q = lane %
// 4) loads the 16 bytes W[row 8j + g][32c + 8q .. + 8) and x[token][32c + 8q .. + 8); the
// reduction's order inside a chunk is free, so the fragments' k = (2q, 2q + 1, 2q + 8, 2q + 9) of
// the two k-steps are these 8 weights in order, for W (B) and x (A) alike: no shuffles, 16-byte
// loads. f32 x is split into bf16 hi + lo (two MMAs; products exact, x kept to 2^-16 of itself),
// bf16 x is exact in one. Tokens past nt read the last token's row (their results are dropped);
// lanes past K read zeros. c[m][j] is the mma D fragment: tokens 16m + g (+ 8), rows 8j + 2q (+ 1).
template <int K, int N, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, bool WVEC, bool XVEC>
__device__ __forceinline__ void matmul_rows_mma(const unsigned short* wb, int n0, const void* x, int x_row_stride, int nt,
                                                int slice, float (&c)[TOK_TILE / 16][RPW / 8][4]) {
  constexpr int MT = TOK_TILE / 16, NT = RPW / 8;
  constexpr int CH = (K + 31) / 32;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const unsigned short* wrow[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) wrow[j] = wb + static_cast<i64>(min(n0 + 8 * j + g, N - 1)) * K;
  int xoff[MT][2];  // element offsets of this lane's token rows (< 64 rows of an int stride)
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    xoff[m][0] = min(16 * m + g, nt - 1) * x_row_stride;
    xoff[m][1] = min(16 * m + g + 8, nt - 1) * x_row_stride;
  }
  for (int c0 = slice; c0 < CH; c0 += KSPLIT * UNROLL) {
    uint4 wq[NT][UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int k = 32 * (c0 + u * KSPLIT) + 8 * q;
#pragma unroll
      for (int j = 0; j < NT; ++j) wq[j][u] = c0 + u * KSPLIT < CH && k < K ? load_w8<WVEC>(wrow[j] + k) : zero_uint4();
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (c0 + u * KSPLIT < CH) {  // uniform over the warp: the mma needs every lane
        const int k = 32 * (c0 + u * KSPLIT) + 8 * q;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          float xa[8], xb[8];
          if (k < K) {
            load8_x<X_DT, XVEC>(x, xoff[m][0] + k, xa);
            load8_x<X_DT, XVEC>(x, xoff[m][1] + k, xb);
          } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) xa[e] = xb[e] = 0.f;
          }
#pragma unroll
          for (int st = 0; st < 2; ++st) {
            const unsigned a[4] = {pack_bf16x2(xa[4 * st], xa[4 * st + 1]), pack_bf16x2(xb[4 * st], xb[4 * st + 1]),
                                   pack_bf16x2(xa[4 * st + 2], xa[4 * st + 3]), pack_bf16x2(xb[4 * st + 2], xb[4 * st + 3])};
#pragma unroll
            for (int j = 0; j < NT; ++j) mma_bf16_16816(c[m][j], a, st == 0 ? wq[j][u].x : wq[j][u].z, st == 0 ? wq[j][u].y : wq[j][u].w);
            if constexpr (X_DT == F32) {
              const unsigned lo[4] = {pack_bf16x2(bf16_residual(xa[4 * st]), bf16_residual(xa[4 * st + 1])),
                                      pack_bf16x2(bf16_residual(xb[4 * st]), bf16_residual(xb[4 * st + 1])),
                                      pack_bf16x2(bf16_residual(xa[4 * st + 2]), bf16_residual(xa[4 * st + 3])),
                                      pack_bf16x2(bf16_residual(xb[4 * st + 2]), bf16_residual(xb[4 * st + 3]))};
#pragma unroll
              for (int j = 0; j < NT; ++j)
                mma_bf16_16816(c[m][j], lo, st == 0 ? wq[j][u].x : wq[j][u].z, st == 0 ? wq[j][u].y : wq[j][u].w);
            }
          }
        }
      }
    }
  }
}

// The rows-as-M tensor-core share of one warp (MMA 2, the few-token steps): RPW / 16 m-tiles of
// mma.m16n8k16 with W's rows as its M against TOK_TILE / 8 n-tiles with the tokens as its N, over
// the 32-wide k-chunks slice, slice + KSPLIT, ... At 2..32 tokens this pads nothing but tokens
// (an n-tile of 8, where tokens-as-M, MMA 1, pads them to 16) and each x fragment feeds RPW / 16
// MMAs from registers. Lane (g = lane / 4, q = lane % 4) loads the 16 bytes W[row][32c + 8q .. + 8)
// of its rows wrow[i][0] (m-tile i's row g) and wrow[i][1] (row g + 8), and x[token 8j + g][32c +
// 8q .. + 8); inside a chunk the reduction's order is free, so the fragments' k = (2q, 2q + 1,
// 2q + 8, 2q + 9) of the two k-steps are these 8 elements in order for A (W) and B (x) alike: no
// shuffles, 16-byte loads. f32 x is split into bf16 hi + lo (two MMAs), bf16 x is exact in one.
// NORM 1 / 2: x is scaled by the norm weight g as it is loaded and this lane's squares go to
// ss[j] (token 8j + g's share; the caller adds the quad's). Tokens past nt read the last token's
// row (their results are dropped); lanes past K read zeros. c[i][j] is the mma D fragment:
// rows 16i + g (+ 8), tokens 8j + 2q (+ 1).
template <int K, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, bool WVEC, bool XVEC, int NORM, int XPF>
__device__ __forceinline__ void matmul_rows_mma_m(const unsigned short* const (&wrow)[RPW / 16][2], const void* x, int x_row_stride,
                                                  int nt, int slice, float (&c)[RPW / 16][TOK_TILE / 8][4], const void* g,
                                                  float (&ss)[TOK_TILE / 8]) {
  constexpr int MT = RPW / 16, NT = TOK_TILE / 8;
  constexpr int CH = (K + 31) / 32;
  const int lane = threadIdx.x % 32, q = lane % 4;
  int xoff[NT];  // element offsets of this lane's token rows
#pragma unroll
  for (int j = 0; j < NT; ++j) xoff[j] = min(8 * j + lane / 4, nt - 1) * x_row_stride;
  for (int c0 = slice; c0 < CH; c0 += KSPLIT * UNROLL) {
    uint4 wq[MT][2][UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int k = 32 * (c0 + u * KSPLIT) + 8 * q;
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) wq[i][h][u] = c0 + u * KSPLIT < CH && k < K ? load_w8<WVEC>(wrow[i][h] + k) : zero_uint4();
    }
    float xq[XPF != 0 ? UNROLL : 1][NT][8];  // XPF 1: the round's x fragments, loaded beside its weights
    if constexpr (XPF != 0) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int k = 32 * (c0 + u * KSPLIT) + 8 * q;
#pragma unroll
        for (int j = 0; j < NT; ++j)
          if (c0 + u * KSPLIT < CH && k < K) load8_x<X_DT, XVEC>(x, xoff[j] + k, xq[u][j]);  // read only where loaded
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (c0 + u * KSPLIT < CH) {  // uniform over the warp: the mma needs every lane
        const int k = 32 * (c0 + u * KSPLIT) + 8 * q;
        float gv[8];
        if constexpr (NORM != 0) {
          if (k < K) load8_x<BF16, XVEC>(g, k, gv);
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          float xv[8];
          if (k < K) {
            if constexpr (XPF != 0) {
#pragma unroll
              for (int e = 0; e < 8; ++e) xv[e] = xq[u][j][e];
            } else {
              load8_x<X_DT, XVEC>(x, xoff[j] + k, xv);
            }
            if constexpr (NORM != 0) {
#pragma unroll
              for (int e = 0; e < 8; ++e) {
                ss[j] = fmaf(xv[e], xv[e], ss[j]);
                xv[e] *= gv[e];
              }
            }
          } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) xv[e] = 0.f;
          }
#pragma unroll
          for (int st = 0; st < 2; ++st) {
            const unsigned hi0 = pack_bf16x2(xv[4 * st], xv[4 * st + 1]), hi1 = pack_bf16x2(xv[4 * st + 2], xv[4 * st + 3]);
            unsigned lo0 = 0, lo1 = 0;
            if constexpr (X_DT == F32 || NORM != 0) {
              lo0 = pack_bf16x2(bf16_residual(xv[4 * st]), bf16_residual(xv[4 * st + 1]));
              lo1 = pack_bf16x2(bf16_residual(xv[4 * st + 2]), bf16_residual(xv[4 * st + 3]));
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
              const unsigned a[4] = {st == 0 ? wq[i][0][u].x : wq[i][0][u].z, st == 0 ? wq[i][1][u].x : wq[i][1][u].z,
                                     st == 0 ? wq[i][0][u].y : wq[i][0][u].w, st == 0 ? wq[i][1][u].y : wq[i][1][u].w};
              mma_bf16_16816(c[i][j], a, hi0, hi1);
              if constexpr (X_DT == F32 || NORM != 0) mma_bf16_16816(c[i][j], a, lo0, lo1);
            }
          }
        }
      }
    }
  }
}

// matmul_rows_mma_m's share of one warp into out[r * TOK_TILE + t] (its rows r, every token of
// the tile) and, NORM, each token's share of the sum of squares into ss_out[t] (the quad's lanes
// added); wrow as there. wvec / xvec: 16-byte weight / x (and g) loads (uniform per launch).
template <int K, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, int NORM = 0, int XPF = 0>
__device__ __forceinline__ void matmul_rows_mma_m_to_partial(const unsigned short* const (&wrow)[RPW / 16][2], const void* xb,
                                                             int x_row_stride, int nt, int slice, bool wvec, bool xvec, float* out,
                                                             const void* g = nullptr, float* ss_out = nullptr) {
  constexpr int MT = RPW / 16, NT = TOK_TILE / 8;
  float c[MT][NT][4], ss[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    ss[j] = 0.f;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[i][j][e] = 0.f;
  }
  if (wvec && xvec) {
    matmul_rows_mma_m<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, true, NORM, XPF>(wrow, xb, x_row_stride, nt, slice, c, g, ss);
  } else if (wvec) {
    matmul_rows_mma_m<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, false, NORM, XPF>(wrow, xb, x_row_stride, nt, slice, c, g, ss);
  } else {
    matmul_rows_mma_m<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, false, false, NORM, XPF>(wrow, xb, x_row_stride, nt, slice, c, g, ss);
  }
  const int lane = threadIdx.x % 32, gr = lane / 4, q = lane % 4;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[(16 * i + gr + (e >= 2 ? 8 : 0)) * TOK_TILE + 8 * j + 2 * q + (e & 1)] = c[i][j][e];
  if constexpr (NORM != 0) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float s = ss[j];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (q == 0) ss_out[8 * j + gr] = s;
    }
  }
}

// The rows of a warp's m-tiles for matmul_rows_mma_m: wrow[i][h] = row(n0 + 16i + 8h + lane / 4).
template <int RPW, class Row>
__device__ __forceinline__ void mma_m_rows(const unsigned short* (&wrow)[RPW / 16][2], int n0, Row row) {
#pragma unroll
  for (int i = 0; i < RPW / 16; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) wrow[i][h] = row(n0 + 16 * i + 8 * h + static_cast<int>(threadIdx.x % 32) / 4);
}

// A warp's share of the CUDA-core W_LAYOUT 0 path, summed over its lanes: row r's partial sum of
// token t over the warp's k-slice into out[r * TOK_TILE + t] (lane 0 writes). wvec / xvec: 16-byte
// weight / x (and g) loads (uniform per launch). NORM 1: x is scaled by the norm weight g and
// the warp's share of each token's sum of squares goes to ss_out[t] (lane 0 writes).
// kp::matmul_siblings streams its rows through it too.
template <int K, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, int NORM = 0>
__device__ __forceinline__ void matmul_rows_to_partial(const unsigned short* const (&wrow)[RPW], const void* xb, int x_row_stride,
                                                       int nt, int slice, bool wvec, bool xvec, float* out, const void* g = nullptr,
                                                       float* ss_out = nullptr) {
  float acc[RPW][TOK_TILE], ss[TOK_TILE];
#pragma unroll
  for (int t = 0; t < TOK_TILE; ++t) {
    ss[t] = 0.f;
#pragma unroll
    for (int r = 0; r < RPW; ++r) acc[r][t] = 0.f;
  }
  if (wvec && xvec) {
    matmul_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, true, NORM>(wrow, xb, x_row_stride, nt, slice, acc, g, ss);
  } else if (wvec) {
    matmul_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, false, NORM>(wrow, xb, x_row_stride, nt, slice, acc, g, ss);
  } else {
    matmul_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, false, false, NORM>(wrow, xb, x_row_stride, nt, slice, acc, g, ss);
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int t = 0; t < TOK_TILE; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if constexpr (NORM != 0) {
#pragma unroll
    for (int t = 0; t < TOK_TILE; ++t) ss[t] = warp_sum(ss[t]);
  }
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int r = 0; r < RPW; ++r)
#pragma unroll
      for (int t = 0; t < TOK_TILE; ++t) out[r * TOK_TILE + t] = acc[r][t];
    if constexpr (NORM != 0) {
#pragma unroll
      for (int t = 0; t < TOK_TILE; ++t) ss_out[t] = ss[t];
    }
  }
}

// NORM: 1 / sqrt(mean square + eps) of token t, from the sums of squares its KSPLIT warps of one
// row group wrote (ss[warp][t], slices in order; each group's slices cover all of K once) --
// the factor kernels_templates/rms_norm.cuh scales a row by.
template <int K, int KSPLIT, int WARPS, int TOK_TILE>
__device__ __forceinline__ float rms_inverse(const float (&ss)[WARPS][TOK_TILE], int group, int t, float eps) {
  float sum = 0.f;
#pragma unroll
  for (int q = 0; q < KSPLIT; ++q) sum += ss[group * KSPLIT + q][t];
  return 1.f / sqrtf(sum / static_cast<float>(K) + eps);
}

// NORM 2: the norm's result rows y = g * (x * inv) of the block's tokens, written in X_DT by the
// blocks of row block 0 (blockIdx.y == 0) for the op's other readers.
template <int K, int X_DT, int KSPLIT, int WARPS, int TOK_TILE>
__device__ __forceinline__ void rms_norm_store(const void* xb, int x_row_stride, const void* g, const float (&ss)[WARPS][TOK_TILE], int nt,
                                               float eps, void* norm_out, i64 out_row0) {
  if (blockIdx.y != 0) return;
  for (int t = 0; t < nt; ++t) {
    const float inv = rms_inverse<K, KSPLIT, WARPS, TOK_TILE>(ss, 0, t, eps);
    for (int k = threadIdx.x; k < K; k += 32 * WARPS)
      store<X_DT>(norm_out, (out_row0 + t) * K + k, load<BF16>(g, k) * (load<X_DT>(xb, static_cast<i64>(t) * x_row_stride + k) * inv));
  }
}

// The prologue (run before kp::grid_dependency_begin): weights are the plan's constants, so while
// the kernel before this one still runs (programmatic dependent launch) the blocks holding the
// first PREFETCH KiB of W ask L2 for their share of them, HBM working through the predecessor's
// short launch (a norm, rope, attention) instead of idling. Only the start of W: asking for every
// block's rows floods L2 past what the first wave reads before it is evicted (the K2.6 slice's
// 1-token step took 1.548 against 1.406 ms with 64 KiB a block, bench/RESULTS.md 2026-12-04).
// W_LAYOUT 0: block y's rows, contiguous; 1: batch b's [K, N], asked for by its first column
// block. Lane l of warp 0 issues the 4 KiB pieces l, l + 32, ...
template <int K, int N, int X_DT, int Y_DT, int W_LAYOUT, int ACC, int ROUTED, int NORM, int WARPS, int TOK_TILE, int RPW, int KSPLIT,
          int UNROLL, int MMA, int PREFETCH, int XPF>
__device__ void matmul_prefetch(const void*, const void* w, void*, const void*, int, int, int, int, int, int w_batch_stride, const void*,
                                void*, float, const void*) {
  if constexpr (PREFETCH > 0) {
    if (blockIdx.x != 0 || threadIdx.x >= 32) return;
    const unsigned short* wb = static_cast<const unsigned short*>(w) + static_cast<i64>(blockIdx.z) * w_batch_stride;
    const i64 limit = static_cast<i64>(PREFETCH) * 512;  // elements of W asked for
    i64 first, count;                                    // elements
    if constexpr (W_LAYOUT == 0) {
      constexpr int ROWS = RPW * (WARPS / KSPLIT);
      const int n0 = blockIdx.y * ROWS;
      first = static_cast<i64>(n0) * K;
      count = min(static_cast<i64>(min(ROWS, N - n0)) * K, limit - first);
    } else {
      if (blockIdx.y != 0) return;
      first = 0;
      count = min(static_cast<i64>(K) * N, limit - static_cast<i64>(blockIdx.z) * K * N);
    }
    if (count <= 0) return;
    // The bulk prefetch takes 16-byte aligned ranges: the range shrinks to them (odd K, views).
    const unsigned long long begin = reinterpret_cast<unsigned long long>(wb + first);
    const unsigned long long lo = (begin + 15) & ~15ull, hi = (begin + 2ull * static_cast<unsigned long long>(count)) & ~15ull;
    if (hi <= lo) return;
    const i64 bytes = static_cast<i64>(hi - lo);
    l2_prefetch_warp(reinterpret_cast<const char*>(lo), bytes);
  }
}

template <int K, int N, int X_DT, int Y_DT, int W_LAYOUT, int ACC, int ROUTED, int NORM, int WARPS, int TOK_TILE, int RPW, int KSPLIT,
          int UNROLL, int MMA, int PREFETCH, int XPF>
__device__ void matmul(const void* x, const void* w, void* y, const void* residual, int n_tokens, int x_row_stride,
                       int x_batch_stride, int y_row_stride, int y_batch_stride, int w_batch_stride, const void* norm_weight,
                       void* norm_out, float eps, const void* routed) {
  static_assert(WARPS % KSPLIT == 0, "KSPLIT must divide WARPS");
  static_assert(W_LAYOUT == 0 || MMA == 0, "W_LAYOUT 1 streams on the CUDA cores");
  static_assert(NORM == 0 || (W_LAYOUT == 0 && MMA != 1), "NORM: the [N, K] stream on the CUDA cores or rows-as-M tiles");
  static_assert(ROUTED == 0 || (W_LAYOUT == 0 && ACC == 1), "ROUTED: a residual add's [N, K] epilogue");
  static_assert(MMA != 1 || (RPW % 8 == 0 && TOK_TILE % 16 == 0 && K % 8 == 0), "MMA 1 tiles: rows by 8, tokens by 16");
  static_assert(MMA != 2 || (RPW % 16 == 0 && TOK_TILE % 8 == 0 && K % 8 == 0), "MMA 2 tiles: rows by 16, tokens by 8");
  static_assert(XPF == 0 || MMA == 2, "XPF: the rows-as-M tiles' x loads");
  static_assert(NORM != 3 || W_LAYOUT == 0, "NORM 3: the [N, K] stream");
  const int b = blockIdx.z;
  const int t0 = blockIdx.x * TOK_TILE;
  const int nt = min(TOK_TILE, n_tokens - t0);
  if (nt <= 0) return;
  const void* xb = offset<X_DT>(x, static_cast<i64>(b) * x_batch_stride + static_cast<i64>(t0) * x_row_stride);
  if constexpr (NORM == 3) {
    // The block's tokens normalised into shared memory as the norm launch would store them, then
    // the stream below reads those bf16 rows (SX_DT, row stride K) as an unfused matmul.
    unsigned short* rows = static_cast<unsigned short*>(dynamic_smem());
    for (int t = 0; t < nt; ++t)
      rms_norm_row<K, X_DT, BF16, 32 * WARPS>(xb, static_cast<i64>(t) * x_row_stride, norm_weight, rows, static_cast<i64>(t) * K, eps);
    __syncthreads();
    xb = rows;
    x_row_stride = K;
  }
  constexpr int SX_DT = NORM == 3 ? BF16 : X_DT;  // the streamed rows' element type
  constexpr int SNORM = NORM == 3 ? 0 : NORM;     // what the stream folds
  const i64 yb = static_cast<i64>(b) * y_batch_stride + static_cast<i64>(t0) * y_row_stride;
  const unsigned short* wb = static_cast<const unsigned short*>(w) + static_cast<i64>(b) * w_batch_stride;

  if constexpr (W_LAYOUT == 0) {
    constexpr int GROUPS = WARPS / KSPLIT;  // row groups per block
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = warp / KSPLIT, slice = warp % KSPLIT;
    const int n0 = (blockIdx.y * GROUPS + group) * RPW;
    // The KSPLIT partial sums of each (row, token) meet here and are added in slice order (KSPLIT
    // 1 too: the stores then need no accumulator registers, which keeps the ACC epilogue from
    // spilling).
    __shared__ float partial[WARPS][RPW * TOK_TILE];
    __shared__ float sum_sq[SNORM != 0 ? WARPS : 1][TOK_TILE];  // NORM: each warp's share of a token's sum of squares
    // Uniform per launch: whole weights are 16-byte aligned rows when K % 8 == 0 (a sliced view
    // may not be); x vector loads need x and its row stride aligned too (and NORM's g).
    const bool wvec = K % 8 == 0 && (reinterpret_cast<unsigned long long>(wb) & 15u) == 0;
    const bool xvec = (reinterpret_cast<unsigned long long>(xb) & 15u) == 0 && x_row_stride % (SX_DT == F32 ? 4 : 8) == 0 &&
                      (SNORM == 0 || (reinterpret_cast<unsigned long long>(norm_weight) & 15u) == 0);
    if constexpr (MMA == 2) {
      const unsigned short* wrow[RPW / 16][2];
      mma_m_rows<RPW>(wrow, n0, [&](int n) { return wb + static_cast<i64>(min(n, N - 1)) * K; });
      matmul_rows_mma_m_to_partial<K, SX_DT, TOK_TILE, RPW, KSPLIT, UNROLL, SNORM, XPF>(wrow, xb, x_row_stride, nt, slice, wvec, xvec, partial[warp],
                                                                               norm_weight, sum_sq[SNORM != 0 ? warp : 0]);
    } else if constexpr (MMA == 1) {
      float c[TOK_TILE / 16][RPW / 8][4];
#pragma unroll
      for (int m = 0; m < TOK_TILE / 16; ++m)
#pragma unroll
        for (int j = 0; j < RPW / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) c[m][j][e] = 0.f;
      if (wvec && xvec) {
        matmul_rows_mma<K, N, SX_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, true>(wb, n0, xb, x_row_stride, nt, slice, c);
      } else if (wvec) {
        matmul_rows_mma<K, N, SX_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, false>(wb, n0, xb, x_row_stride, nt, slice, c);
      } else {
        matmul_rows_mma<K, N, SX_DT, TOK_TILE, RPW, KSPLIT, UNROLL, false, false>(wb, n0, xb, x_row_stride, nt, slice, c);
      }
      const int g = lane / 4, q = lane % 4;
#pragma unroll
      for (int m = 0; m < TOK_TILE / 16; ++m)
#pragma unroll
        for (int j = 0; j < RPW / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            partial[warp][(8 * j + 2 * q + (e & 1)) * TOK_TILE + 16 * m + g + (e >= 2 ? 8 : 0)] = c[m][j][e];
    } else {
      const unsigned short* wrow[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r) wrow[r] = wb + static_cast<i64>(min(n0 + r, N - 1)) * K;
      matmul_rows_to_partial<K, SX_DT, TOK_TILE, RPW, KSPLIT, UNROLL, SNORM>(wrow, xb, x_row_stride, nt, slice, wvec, xvec, partial[warp],
                                                                         norm_weight, sum_sq[SNORM != 0 ? warp : 0]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < GROUPS * RPW * TOK_TILE; i += 32 * WARPS) {
      const int g = i / (RPW * TOK_TILE), r = i / TOK_TILE % RPW, t = i % TOK_TILE;
      const int n = (blockIdx.y * GROUPS + g) * RPW + r;
      if (t < nt && n < N) {
        float s = 0.f;
#pragma unroll
        for (int q = 0; q < KSPLIT; ++q) s += partial[g * KSPLIT + q][r * TOK_TILE + t];
        if constexpr (SNORM != 0) s *= rms_inverse<K, KSPLIT, WARPS, TOK_TILE>(sum_sq, g, t, eps);
        if constexpr (ROUTED > 0) {  // the MoE combine: the pairs' rows in order, then the shared expert's
          const float* pr = static_cast<const float*>(routed) + static_cast<i64>(t0 + t) * ROUTED * N + n;
          float sum = 0.f;
#pragma unroll
          for (int r = 0; r < ROUTED; ++r) sum += pr[static_cast<i64>(r) * N];
          s = sum + s;
        }
        const i64 o = yb + static_cast<i64>(t) * y_row_stride + n;
        store<Y_DT>(y, o, ACC ? load<Y_DT>(residual, o) + s : s);
      }
    }
    if constexpr (NORM == 2) rms_norm_store<K, X_DT, KSPLIT, WARPS, TOK_TILE>(xb, x_row_stride, norm_weight, sum_sq, nt, eps, norm_out, t0);
  } else {
    constexpr int GROUPS = WARPS / KSPLIT;         // column groups per block
    constexpr int COLS = 256 * RPW;                // columns per group (RPW chunks of 8 per lane)
    const int block_col = blockIdx.y * GROUPS * COLS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const bool vec = N % 8 == 0 && (reinterpret_cast<unsigned long long>(wb) & 15u) == 0;
    if (vec) {
      const int group = warp / KSPLIT, slice = warp % KSPLIT;
      const int col0 = block_col + group * COLS + lane * 8;  // chunk c at col0 + 256 c
      float acc[RPW * 8][TOK_TILE];
#pragma unroll
      for (int j = 0; j < RPW * 8; ++j)
#pragma unroll
        for (int t = 0; t < TOK_TILE; ++t) acc[j][t] = 0.f;
      for (int k0 = slice; k0 < K; k0 += KSPLIT * UNROLL) {
        uint4 wv[UNROLL][RPW];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const int k = k0 + u * KSPLIT;
#pragma unroll
          for (int c = 0; c < RPW; ++c) {
            const int col = col0 + 256 * c;
            wv[u][c] = k < K && col < N ? ldg_stream16(wb + static_cast<i64>(k) * N + col) : zero_uint4();
          }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const int k = k0 + u * KSPLIT;
          if (k < K) {
            float xv[TOK_TILE];
#pragma unroll
            for (int t = 0; t < TOK_TILE; ++t) xv[t] = t < nt ? load<X_DT>(xb, static_cast<i64>(t) * x_row_stride + k) : 0.f;
#pragma unroll
            for (int c = 0; c < RPW; ++c) {
              float wf[8];
              unpack8_bf16(wv[u][c], wf);
#pragma unroll
              for (int e = 0; e < 8; ++e)
#pragma unroll
                for (int t = 0; t < TOK_TILE; ++t) acc[8 * c + e][t] = fmaf(wf[e], xv[t], acc[8 * c + e][t]);
            }
          }
        }
      }
      // The KSPLIT slices of each (column, token) meet here and are added in slice order.
      __shared__ float colpart[KSPLIT > 1 ? WARPS : 1][KSPLIT > 1 ? COLS * TOK_TILE : 1];
      if constexpr (KSPLIT > 1) {
#pragma unroll
        for (int c = 0; c < RPW; ++c)
#pragma unroll
          for (int e = 0; e < 8; ++e)
#pragma unroll
            for (int t = 0; t < TOK_TILE; ++t) colpart[warp][((256 * c + lane * 8 + e) * TOK_TILE) + t] = acc[8 * c + e][t];
        __syncthreads();
        for (int i = threadIdx.x; i < GROUPS * COLS * TOK_TILE; i += 32 * WARPS) {
          const int g = i / (COLS * TOK_TILE), j = i / TOK_TILE % COLS, t = i % TOK_TILE;
          const int n = block_col + g * COLS + j;
          if (t < nt && n < N) {
            float sum = 0.f;
#pragma unroll
            for (int q = 0; q < KSPLIT; ++q) sum += colpart[g * KSPLIT + q][j * TOK_TILE + t];
            const i64 o = yb + static_cast<i64>(t) * y_row_stride + n;
            store<Y_DT>(y, o, ACC ? load<Y_DT>(residual, o) + sum : sum);
          }
        }
      } else {
#pragma unroll
        for (int c = 0; c < RPW; ++c)
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int n = col0 + 256 * c + e;
#pragma unroll
            for (int t = 0; t < TOK_TILE; ++t) {
              if (t < nt && n < N) {
                const i64 o = yb + static_cast<i64>(t) * y_row_stride + n;
                store<Y_DT>(y, o, ACC ? load<Y_DT>(residual, o) + acc[8 * c + e][t] : acc[8 * c + e][t]);
              }
            }
          }
      }
    } else {
      // Scalar: one thread per column of the block's range, all of K.
      for (int n = block_col + threadIdx.x; n < block_col + GROUPS * COLS && n < N; n += 32 * WARPS) {
        float acc[TOK_TILE];
#pragma unroll
        for (int r = 0; r < TOK_TILE; ++r) acc[r] = 0.f;
        for (int k = 0; k < K; ++k) {
          const float wv = bf16_to_f32(wb[static_cast<i64>(k) * N + n]);
#pragma unroll
          for (int r = 0; r < TOK_TILE; ++r) {
            if (r < nt) acc[r] += wv * load<X_DT>(xb, static_cast<i64>(r) * x_row_stride + k);
          }
        }
#pragma unroll
        for (int r = 0; r < TOK_TILE; ++r) {
          if (r < nt) {
            const i64 o = yb + static_cast<i64>(r) * y_row_stride + n;
            store<Y_DT>(y, o, ACC ? load<Y_DT>(residual, o) + acc[r] : acc[r]);
          }
        }
      }
    }
  }
}

}  // namespace kp
