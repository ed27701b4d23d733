#pragma once
// Dense matmul with bf16 weights, f32 accumulation, for the small token counts of decode and
// tree verify (and prefill chunks, by tiling tokens):
//   y[b, t, n] = (ACC ? y[b, t, n] : 0) + sum_k x[b, t, k] * W[b](n, k)
// W_LAYOUT 0: W[b] is bf16 [N, K] row-major (nn.Linear's weight): the bandwidth path below.
// W_LAYOUT 1: W[b] is bf16 [K, N] row-major (e.g. absorbed MLA W_UK per head); one thread per n.
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
//   - Tensor cores (mma.sync m16n8k16 with x split into bf16 hi + lo for f32 accuracy) are the
//     next step for >= 16 tokens, where this path becomes FMA- and L1-bound; not built yet.
// Rows past N are clamped for the loads (no predicated loads) and never stored. K not a multiple
// of 8, or a weight view that is not 16-byte aligned, takes a scalar path with the same split.
//
// Template parameters:
//   K, N      reduction and output dims
//   X_DT      element type of x (kp::F32 / kp::BF16)
//   Y_DT      element type of y
//   W_LAYOUT  0 = [N, K], 1 = [K, N]
//   ACC       1: add into y (fused residual add); 0: overwrite y
//   WARPS     warps per block
//   TOK_TILE  tokens handled per block (each weight load is reused TOK_TILE times)
//   RPW       W_LAYOUT 0: rows per warp (each x load reused RPW times); 1 for W_LAYOUT 1
//   KSPLIT    W_LAYOUT 0: warps of a block sharing rows, splitting K (divides WARPS); 1 for W_LAYOUT 1
//   UNROLL    W_LAYOUT 0: 16-byte weight loads in flight per lane and row; 1 for W_LAYOUT 1
// Launch (compiler/codegen/families/matmul.cc):
//   W_LAYOUT 0: grid (ceil(n_tokens / TOK_TILE), ceil(N / (RPW * WARPS / KSPLIT)), batch), block (32 * WARPS)
//   W_LAYOUT 1: grid (ceil(n_tokens / TOK_TILE), ceil(N / (32 * WARPS)), batch), block (32 * WARPS)
// Arguments:
//   x               X_DT; element (b, t, k) at b * x_batch_stride + t * x_row_stride + k
//   w               bf16, batch b at b * w_batch_stride
//   y               Y_DT; element (b, t, n) at b * y_batch_stride + t * y_row_stride + n
//   n_tokens        tokens (rows of x) in this step
//   x_row_stride, x_batch_stride, y_row_stride, y_batch_stride, w_batch_stride   in elements
#include "weight_dot.cuh"

namespace kp {

// One warp's share of the W_LAYOUT 0 path: partial sums acc[r][t] (this lane's) of rows
// row[0..RPW) over its k-slice, for tokens t < nt. VEC: 16-byte weight (and x) loads.
template <int K, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, bool VEC, bool XVEC>
__device__ __forceinline__ void matmul_rows(const unsigned short* const (&wrow)[RPW], const void* x, int x_row_stride, int nt,
                                            int slice, float (&acc)[RPW][TOK_TILE]) {
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
#pragma unroll
          for (int t = 0; t < TOK_TILE; ++t) {
            if (t < nt) {
              float xv[8];
              load8_x<X_DT, XVEC>(x, static_cast<i64>(t) * x_row_stride + 8 * c, xv);
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
#pragma unroll
      for (int t = 0; t < TOK_TILE; ++t) {
        if (t < nt) {
          const float xv = load<X_DT>(x, static_cast<i64>(t) * x_row_stride + k);
#pragma unroll
          for (int r = 0; r < RPW; ++r) acc[r][t] = fmaf(wf[r], xv, acc[r][t]);
        }
      }
    }
  }
}

template <int K, int N, int X_DT, int Y_DT, int W_LAYOUT, int ACC, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int UNROLL>
__device__ void matmul(const void* x, const void* w, void* y, int n_tokens, int x_row_stride,
                       int x_batch_stride, int y_row_stride, int y_batch_stride, int w_batch_stride) {
  static_assert(WARPS % KSPLIT == 0, "KSPLIT must divide WARPS");
  static_assert(W_LAYOUT == 0 || (RPW == 1 && KSPLIT == 1 && UNROLL == 1), "W_LAYOUT 1 has no row tiling");
  const int b = blockIdx.z;
  const int t0 = blockIdx.x * TOK_TILE;
  const int nt = min(TOK_TILE, n_tokens - t0);
  if (nt <= 0) return;
  const void* xb = offset<X_DT>(x, static_cast<i64>(b) * x_batch_stride + static_cast<i64>(t0) * x_row_stride);
  const i64 yb = static_cast<i64>(b) * y_batch_stride + static_cast<i64>(t0) * y_row_stride;
  const unsigned short* wb = static_cast<const unsigned short*>(w) + static_cast<i64>(b) * w_batch_stride;

  if constexpr (W_LAYOUT == 0) {
    constexpr int GROUPS = WARPS / KSPLIT;  // row groups per block
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = warp / KSPLIT, slice = warp % KSPLIT;
    const int n0 = (blockIdx.y * GROUPS + group) * RPW;
    const unsigned short* wrow[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) wrow[r] = wb + static_cast<i64>(min(n0 + r, N - 1)) * K;
    float acc[RPW][TOK_TILE];
#pragma unroll
    for (int r = 0; r < RPW; ++r)
#pragma unroll
      for (int t = 0; t < TOK_TILE; ++t) acc[r][t] = 0.f;
    // Uniform per launch: whole weights are 16-byte aligned rows when K % 8 == 0 (a sliced view
    // may not be); x vector loads need x and its row stride aligned too.
    const bool wvec = K % 8 == 0 && (reinterpret_cast<unsigned long long>(wb) & 15u) == 0;
    const bool xvec = (reinterpret_cast<unsigned long long>(xb) & 15u) == 0 && x_row_stride % (X_DT == F32 ? 4 : 8) == 0;
    if (wvec && xvec) {
      matmul_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, true>(wrow, xb, x_row_stride, nt, slice, acc);
    } else if (wvec) {
      matmul_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true, false>(wrow, xb, x_row_stride, nt, slice, acc);
    } else {
      matmul_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, false, false>(wrow, xb, x_row_stride, nt, slice, acc);
    }
#pragma unroll
    for (int r = 0; r < RPW; ++r)
#pragma unroll
      for (int t = 0; t < TOK_TILE; ++t) acc[r][t] = warp_sum(acc[r][t]);
    {
      // The KSPLIT partial sums of each (row, token), added in slice order (KSPLIT 1 too: the
      // stores then need no accumulator registers, which keeps the ACC epilogue from spilling).
      __shared__ float partial[WARPS][RPW * TOK_TILE];
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < RPW; ++r)
#pragma unroll
          for (int t = 0; t < TOK_TILE; ++t) partial[warp][r * TOK_TILE + t] = acc[r][t];
      }
      __syncthreads();
      for (int i = threadIdx.x; i < GROUPS * RPW * TOK_TILE; i += 32 * WARPS) {
        const int g = i / (RPW * TOK_TILE), r = i / TOK_TILE % RPW, t = i % TOK_TILE;
        const int n = (blockIdx.y * GROUPS + g) * RPW + r;
        if (t < nt && n < N) {
          float s = 0.f;
#pragma unroll
          for (int q = 0; q < KSPLIT; ++q) s += partial[g * KSPLIT + q][r * TOK_TILE + t];
          const i64 o = yb + static_cast<i64>(t) * y_row_stride + n;
          store<Y_DT>(y, o, ACC ? load<Y_DT>(y, o) + s : s);
        }
      }
    }
  } else {
    const int n = blockIdx.y * (32 * WARPS) + threadIdx.x;
    if (n >= N) return;
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
        store<Y_DT>(y, o, ACC ? load<Y_DT>(y, o) + acc[r] : acc[r]);
      }
    }
  }
}

}  // namespace kp
