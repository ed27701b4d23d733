#pragma once
// Matmul with compressed-tensors pack-quantized INT4 weights (group 32, symmetric), dequantised
// in registers (never expanded in memory), f32 accumulation:
//   y[t, n] = (ACC ? y[t, n] : 0) + sum_k x[t, k] * dequant(W)(n, k)
// Packing and dequantisation as kp::dot_int4 (weight_dot.cuh): weight k of a row is nibble k % 8
// of int32 word k / 8 (low nibble first), q in [0, 15] meaning q - 8, times the bf16 scale of
// its group of 32; each group's dot product is taken with the integers and scaled once.
//
// The same weight stream as the dense matmul (matmul.cuh's doc block says why): a warp owns RPW
// rows and a 1/KSPLIT share of the groups; each lane issues RPW * UNROLL 16-byte loads (one
// group of 32 weights each, beside its 2-byte scale) before any math; the KSPLIT partial sums
// meet in shared memory and are added in warp order; token tiles are blockIdx.x (the fastest
// index), so the tiles of one row block share its weight reads in L2. Rows past N are clamped
// for the loads and never stored.
//
// Template parameters:
//   K, N      reduction and output dims (K % 32 == 0)
//   X_DT      element type of x;  Y_DT  element type of y
//   ACC       1: add into y; 0: overwrite
//   WARPS     warps per block
//   TOK_TILE  tokens per block
//   RPW       rows per warp
//   KSPLIT    warps of a block sharing rows, splitting the groups (divides WARPS)
//   UNROLL    16-byte loads (groups) in flight per lane and row
// Launch: grid (ceil(n_tokens / TOK_TILE), ceil(N / (RPW * WARPS / KSPLIT))), block (32 * WARPS).
// Arguments:
//   x             X_DT [n_tokens, K] with row stride x_row_stride
//   w_packed      int32 [N, K / 8]
//   w_scale       bf16 [N, K / 32]
//   y             Y_DT [n_tokens, N] with row stride y_row_stride
//   n_tokens, x_row_stride, y_row_stride
#include "weight_dot.cuh"

namespace kp {

template <int K, int X_DT, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, bool XVEC>
__device__ __forceinline__ void matmul_int4_rows(const int* const (&prow)[RPW], const unsigned short* const (&srow)[RPW],
                                                 const void* x, int x_row_stride, int nt, int slice,
                                                 float (&acc)[RPW][TOK_TILE]) {
  constexpr int G = K / 32;           // groups per row
  constexpr int STEP = 32 * KSPLIT;   // group distance between a lane's loads
  const int lane = threadIdx.x % 32;
  for (int c0 = lane + 32 * slice; c0 < G; c0 += STEP * UNROLL) {
    uint4 q[RPW][UNROLL];
    float scale[RPW][UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int c = c0 + u * STEP;
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        q[r][u] = c < G ? ldg_stream16(prow[r] + 4 * c) : zero_uint4();
        scale[r][u] = c < G ? load<BF16>(srow[r], c) : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int c = c0 + u * STEP;
      if (c < G) {
        float part[RPW][TOK_TILE];
#pragma unroll
        for (int r = 0; r < RPW; ++r)
#pragma unroll
          for (int t = 0; t < TOK_TILE; ++t) part[r][t] = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float wf[RPW][8];
#pragma unroll
          for (int r = 0; r < RPW; ++r) {
            const unsigned word = i == 0 ? q[r][u].x : i == 1 ? q[r][u].y : i == 2 ? q[r][u].z : q[r][u].w;
#pragma unroll
            for (int j = 0; j < 8; ++j) wf[r][j] = static_cast<float>(static_cast<int>((word >> (4 * j)) & 15u) - 8);
          }
#pragma unroll
          for (int t = 0; t < TOK_TILE; ++t) {
            if (t < nt) {
              float xv[8];
              load8_x<X_DT, XVEC>(x, static_cast<i64>(t) * x_row_stride + 32 * c + 8 * i, xv);
#pragma unroll
              for (int r = 0; r < RPW; ++r) {
                float s = part[r][t];
#pragma unroll
                for (int j = 0; j < 8; ++j) s = fmaf(wf[r][j], xv[j], s);
                part[r][t] = s;
              }
            }
          }
        }
#pragma unroll
        for (int r = 0; r < RPW; ++r)
#pragma unroll
          for (int t = 0; t < TOK_TILE; ++t) acc[r][t] = fmaf(part[r][t], scale[r][u], acc[r][t]);
      }
    }
  }
}

template <int K, int N, int X_DT, int Y_DT, int ACC, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int UNROLL>
__device__ void matmul_int4(const void* x, const void* w_packed, const void* w_scale, void* y,
                            int n_tokens, int x_row_stride, int y_row_stride) {
  static_assert(K % 32 == 0, "INT4 rows must hold whole groups of 32");
  static_assert(WARPS % KSPLIT == 0, "KSPLIT must divide WARPS");
  constexpr int GROUPS = WARPS / KSPLIT;
  const int t0 = blockIdx.x * TOK_TILE;
  const int nt = min(TOK_TILE, n_tokens - t0);
  if (nt <= 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp / KSPLIT, slice = warp % KSPLIT;
  const int n0 = (blockIdx.y * GROUPS + group) * RPW;
  const int* prow[RPW];
  const unsigned short* srow[RPW];
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const i64 n = min(n0 + r, N - 1);
    prow[r] = static_cast<const int*>(w_packed) + n * (K / 8);
    srow[r] = static_cast<const unsigned short*>(w_scale) + n * (K / 32);
  }
  float acc[RPW][TOK_TILE];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int t = 0; t < TOK_TILE; ++t) acc[r][t] = 0.f;
  const void* xb = offset<X_DT>(x, static_cast<i64>(t0) * x_row_stride);
  const bool xvec = (reinterpret_cast<unsigned long long>(xb) & 15u) == 0 && x_row_stride % (X_DT == F32 ? 4 : 8) == 0;
  if (xvec) {
    matmul_int4_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, true>(prow, srow, xb, x_row_stride, nt, slice, acc);
  } else {
    matmul_int4_rows<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, false>(prow, srow, xb, x_row_stride, nt, slice, acc);
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int t = 0; t < TOK_TILE; ++t) acc[r][t] = warp_sum(acc[r][t]);
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
      const i64 o = static_cast<i64>(t0 + t) * y_row_stride + n;
      store<Y_DT>(y, o, ACC ? load<Y_DT>(y, o) + s : s);
    }
  }
}

}  // namespace kp
