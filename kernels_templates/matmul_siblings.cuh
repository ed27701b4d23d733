#pragma once
// Sibling matmuls: two or three bf16 [N_i, K] weights applied to the same activations in one
// launch (q_a_proj + kv_a_proj_with_mqa, a router with the shared expert's gate and up
// projections, an MLP's gate and up projections), f32 accumulation:
//   y[t, n]  = sum_k x[t, k] * W(n, k)     n < N
//   y2[t, n] = sum_k x[t, k] * W2(n, k)    n < N2
//   y3[t, n] = sum_k x[t, k] * W3(n, k)    n < N3 (N3 0: no third)
// A decode step is launch-bound at its narrow projections (each launch costs the SMs a ramp and
// a tail, and kv_a's 576 rows alone fill 4 warps an SM): the rows of all siblings are one row
// space of N + N2 + N3 rows that the grid's row blocks stream as kp::matmul's CUDA-core W_LAYOUT 0
// path does (kp::matmul_rows: rows per warp, K split over a block's warps, 16-byte weight loads
// in flight), each row reading its own matrix and writing its own output: each is kp::matmul's
// sum up to f32 summation order (the K split follows the total rows). MMA 2: the same row space
// on the tensor cores as kp::matmul's MMA 2 streams it (rows as mma's M, 16 a tile, each row
// its own matrix's), for the few-token steps. Steps the op rule puts on MMA 1 launch the siblings
// one by one (compiler/passes/sibling_matmuls.h).
// GLU 1: W2 and W3 are an MLP's gate and up projections (N2 == N3) read by nothing but its
// SwiGLU: their rows interleave in the row space (gate i, then up i: one warp's partial sums
// hold both) and the launch writes y2[t, i] = silu(x W2(i, :)) * (x W3(i, :)) (y3 unwritten): no
// swiglu launch, no gate / up rows stored (bf16 outputs: gate and up rounded to bf16 first, as
// the unfused chain stores them, so the result is the unfused one). W (N rows, 0 for a dense
// MLP's gate and up alone) is a plain sibling into y. N and RPW are even so a pair never
// straddles two warps' rows.
//
// NORM 1 / 2: x is read as rms_norm(x, norm_weight, eps), the norm folded in as kp::matmul's NORM
// does it (the layer norm before q_a + kv_a, or before a router and its shared expert: no norm
// launch); 2 also writes the norm's result to norm_out for its other readers (a MoE layer's
// routed experts).
//
// ROUTE_K > 0 (a MoE layer's router as the first sibling, its logits f32): the launch also routes the
// step, as kp::moe_router would from its logits (moe_router.cuh's moe_route_token, ungrouped: a
// warp a token; RNORM its norm_topk_prob), into topk_ids / topk_weights: each block that wrote
// router rows counts itself in *route_count once its rows are stored (a fence, then an atomic), and
// the last of them -- every logit then stored -- routes and puts the count back to 0 for the next
// launch (route_count: a persistent zeroed word of the plan, compiler/passes/router_experts.h). The
// router's blocks are the grid's first row blocks, so the routing runs beside the later siblings'
// stream (the shared expert's gate and up), and the experts' gate/up launch reads ready ids.
//
// Template parameters:
//   K            reduction dim, shared
//   N, N2, N3    rows of W, W2, W3 (N3 0: two siblings; GLU 1: N may be 0, N2 == N3)
//   GLU          1: W2, W3 a gate and up pair whose SwiGLU goes to y2 (above)
//   NORM         0: x as is; 1: rms_norm(x); 2: rms_norm(x), its rows written to norm_out (kp::matmul's)
//   X_DT, Y_DT   element types of x and of every y
//   WARPS, TOK_TILE, RPW, KSPLIT, UNROLL   as kp::matmul's (its CUDA-core path; MMA 2: its rows-as-M path)
//   MMA          0: the CUDA cores; 2: rows-as-M tensor-core tiles (RPW by 16, TOK_TILE by 8, K % 8 == 0)
//   XPF          MMA 2: kp::matmul's XPF (a round's x fragments loaded beside its weights); 0 otherwise
//   YA_F32       1: y (the first sibling's, N > 0) is f32 whatever Y_DT: a MoE layer's router, whose
//                logits stay f32 (compiler/passes/storage_dtypes.cc), beside its shared expert's bf16
//                gate and up, so the router is no launch of its own; 0: y is Y_DT like the others
//   ROUTE_K      0: no routing; > 0: the router's top-k (TOPK, above), over N experts
//   RNORM        ROUTE_K: the router's norm_topk_prob
// Launch (compiler/codegen/families/matmul_siblings.cc):
//   grid (ceil(n_tokens / TOK_TILE), ceil((N + N2 + N3) / (RPW * WARPS / KSPLIT)), 1), block (32 * WARPS)
//   (the same N + N2 + N3 rows with GLU 1)
// Arguments:
//   x               X_DT; row t at t * x_row_stride
//   w, w2, w3       bf16 [N, K], [N2, K], [N3, K] row-major (w3 unread when N3 is 0)
//   y, y2, y3       Y_DT (y: f32 with YA_F32 1); row t at t * y_row_stride, t * y2_row_stride, t * y3_row_stride
//   n_tokens        tokens (rows of x) in this step
//   x_row_stride, y_row_stride, y2_row_stride, y3_row_stride   in elements
//   norm_weight, norm_out, eps                                  NORM (kp::matmul's)
//   bias            ROUTE_K: f32 [N], the router's score correction bias
//   topk_ids        ROUTE_K: int32 [n_tokens, ROUTE_K], written
//   topk_weights    ROUTE_K: f32 [n_tokens, ROUTE_K], written
//   route_count     ROUTE_K: uint32, 0 between launches
//   routed_scaling  ROUTE_K: the router's routed_scaling_factor
#include "matmul.cuh"
#include "moe_router.cuh"  // moe_route_token (ROUTE_K)

namespace kp {

// Row n of the sibling row space: its matrix's row (clamped past the end for loads only).
template <int K, int N, int N2, int N3, int GLU>
__device__ __forceinline__ const unsigned short* sibling_row(const void* w, const void* w2, const void* w3, int n) {
  n = min(n, N + N2 + N3 - 1);
  if (n < N) return static_cast<const unsigned short*>(w) + static_cast<i64>(n) * K;
  if constexpr (GLU == 1) {  // gate i, up i, gate i + 1, ...
    const int i = (n - N) / 2;
    return static_cast<const unsigned short*>((n - N) % 2 ? w3 : w2) + static_cast<i64>(i) * K;
  }
  if (n < N + N2) return static_cast<const unsigned short*>(w2) + static_cast<i64>(n - N) * K;
  return static_cast<const unsigned short*>(w3) + static_cast<i64>(n - N - N2) * K;
}

// ROUTE_K: after the block's rows are stored, the last of the router's blocks routes the step.
template <int N, int ROUTE_K, int RNORM, int WARPS, int ROWS_PER_BLOCK>
__device__ __forceinline__ void siblings_route_when_last(const void* logits, int y_row_stride, const void* bias, void* topk_ids,
                                                         void* topk_weights, void* route_count, float routed_scaling, int n_tokens) {
  constexpr int ROUTER_ROW_BLOCKS = (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
  if (static_cast<int>(blockIdx.y) >= ROUTER_ROW_BLOCKS) return;
  __shared__ bool last;
  __syncthreads();  // the block's logits are stored
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible before this block counts
    const unsigned ticket = atomicAdd(static_cast<unsigned*>(route_count), 1u);
    last = ticket == gridDim.x * ROUTER_ROW_BLOCKS - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = warp; t < n_tokens; t += WARPS) {
    int ids[ROUTE_K];
    float wts[ROUTE_K];
    moe_route_token<N, ROUTE_K, 1, 1, RNORM>(static_cast<const float*>(logits) + static_cast<i64>(t) * y_row_stride,
                                             static_cast<const float*>(bias), nullptr, routed_scaling, ids, wts);
    if (lane == 0)
#pragma unroll
      for (int k = 0; k < ROUTE_K; ++k) {
        static_cast<int*>(topk_ids)[static_cast<i64>(t) * ROUTE_K + k] = ids[k];
        static_cast<float*>(topk_weights)[static_cast<i64>(t) * ROUTE_K + k] = wts[k];
      }
  }
  if (threadIdx.x == 0) *static_cast<unsigned*>(route_count) = 0u;  // for the next launch
}

template <int K, int N, int N2, int N3, int GLU, int NORM, int X_DT, int Y_DT, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int UNROLL,
          int MMA, int XPF, int YA_F32, int ROUTE_K = 0, int RNORM = 0>
__device__ void matmul_siblings(const void* x, const void* w, const void* w2, const void* w3, void* y, void* y2, void* y3,
                                int n_tokens, int x_row_stride, int y_row_stride, int y2_row_stride, int y3_row_stride,
                                const void* norm_weight, void* norm_out, float eps, const void* bias = nullptr, void* topk_ids = nullptr,
                                void* topk_weights = nullptr, void* route_count = nullptr, float routed_scaling = 1.f) {
  static_assert(WARPS % KSPLIT == 0, "KSPLIT must divide WARPS");
  static_assert(NORM >= 0 && NORM <= 2, "NORM 0, 1 or 2");
  static_assert(GLU == 0 ? N > 0 && N2 > 0 && N3 >= 0 : N >= 0 && N2 > 0 && N3 == N2, "two or three siblings; GLU: a gate and up pair");
  static_assert(GLU == 0 || (N % 2 == 0 && RPW % 2 == 0), "GLU: a gate and up pair within one warp's rows");
  static_assert(MMA == 0 || (MMA == 2 && RPW % 16 == 0 && TOK_TILE % 8 == 0 && K % 8 == 0), "MMA 0, or 2: rows by 16, tokens by 8");
  static_assert(XPF == 0 || MMA == 2, "XPF: the rows-as-M tiles' x loads");
  static_assert(YA_F32 == 0 || (YA_F32 == 1 && N > 0), "YA_F32: an f32 first sibling");
  static_assert(ROUTE_K == 0 || ((YA_F32 == 1 || Y_DT == F32) && GLU == 1 && N > 0 && N <= 1024), "ROUTE_K: the f32 router logits beside a GLU pair");
  constexpr int GROUPS = WARPS / KSPLIT;
  constexpr int ROWS = N + N2 + N3;
  const int t0 = blockIdx.x * TOK_TILE;
  const int nt = min(TOK_TILE, n_tokens - t0);
  if (nt <= 0) return;
  const void* xb = offset<X_DT>(x, static_cast<i64>(t0) * x_row_stride);
  const int warp = threadIdx.x / 32;
  const int group = warp / KSPLIT, slice = warp % KSPLIT;
  const int n0 = (blockIdx.y * GROUPS + group) * RPW;
  __shared__ float partial[WARPS][RPW * TOK_TILE];
  __shared__ float sum_sq[NORM != 0 ? WARPS : 1][TOK_TILE];  // NORM: each warp's share of a token's sum of squares
  // Uniform per launch: whole weights are 16-byte aligned rows when K % 8 == 0.
  const bool wvec = K % 8 == 0 && ((reinterpret_cast<unsigned long long>(w) | reinterpret_cast<unsigned long long>(w2) |
                                    (N3 > 0 ? reinterpret_cast<unsigned long long>(w3) : 0ull)) & 15u) == 0;
  const bool xvec = (reinterpret_cast<unsigned long long>(xb) & 15u) == 0 && x_row_stride % (X_DT == F32 ? 4 : 8) == 0 &&
                    (NORM == 0 || (reinterpret_cast<unsigned long long>(norm_weight) & 15u) == 0);
  if constexpr (MMA == 2) {
    const unsigned short* wrow[RPW / 16][2];
    mma_m_rows<RPW>(wrow, n0, [&](int n) { return sibling_row<K, N, N2, N3, GLU>(w, w2, w3, n); });
    matmul_rows_mma_m_to_partial<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, NORM, XPF>(wrow, xb, x_row_stride, nt, slice, wvec, xvec, partial[warp],
                                                                             norm_weight, sum_sq[NORM != 0 ? warp : 0]);
  } else {
    const unsigned short* wrow[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) wrow[r] = sibling_row<K, N, N2, N3, GLU>(w, w2, w3, n0 + r);
    matmul_rows_to_partial<K, X_DT, TOK_TILE, RPW, KSPLIT, UNROLL, NORM>(wrow, xb, x_row_stride, nt, slice, wvec, xvec, partial[warp],
                                                                         norm_weight, sum_sq[NORM != 0 ? warp : 0]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < GROUPS * RPW * TOK_TILE; i += 32 * WARPS) {
    const int g = i / (RPW * TOK_TILE), r = i / TOK_TILE % RPW, t = i % TOK_TILE;
    const int n = (blockIdx.y * GROUPS + g) * RPW + r;
    if (t >= nt || n >= ROWS) continue;
    if (GLU == 1 && n >= N && (n - N) % 2 == 1) continue;  // an up row: taken with its gate
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < KSPLIT; ++q) s += partial[g * KSPLIT + q][r * TOK_TILE + t];
    float inv = 1.f;
    if constexpr (NORM != 0) {
      inv = rms_inverse<K, KSPLIT, WARPS, TOK_TILE>(sum_sq, g, t, eps);
      s *= inv;
    }
    const i64 row = t0 + t;
    if (GLU == 1 && n >= N) {  // gate row r, its up row r + 1 (the same warps' partials)
      float u = 0.f;
#pragma unroll
      for (int q = 0; q < KSPLIT; ++q) u += partial[g * KSPLIT + q][(r + 1) * TOK_TILE + t];
      if constexpr (NORM != 0) u *= inv;
      if constexpr (Y_DT == BF16) {  // rounded as the unfused chain stores them: the same result
        s = bf16_to_f32(f32_to_bf16(s));
        u = bf16_to_f32(f32_to_bf16(u));
      }
      store<Y_DT>(y2, row * y2_row_stride + (n - N) / 2, silu(s) * u);
    } else if (n < N) {
      store<YA_F32 == 1 ? F32 : Y_DT>(y, row * y_row_stride + n, s);
    } else if (n < N + N2) {
      store<Y_DT>(y2, row * y2_row_stride + (n - N), s);
    } else {
      store<Y_DT>(y3, row * y3_row_stride + (n - N - N2), s);
    }
  }
  if constexpr (NORM == 2) rms_norm_store<K, X_DT, KSPLIT, WARPS, TOK_TILE>(xb, x_row_stride, norm_weight, sum_sq, nt, eps, norm_out, t0);
  if constexpr (ROUTE_K > 0)
    siblings_route_when_last<N, ROUTE_K, RNORM, WARPS, RPW * GROUPS>(y, y_row_stride, bias, topk_ids, topk_weights, route_count,
                                                                     routed_scaling, n_tokens);
}

}  // namespace kp
