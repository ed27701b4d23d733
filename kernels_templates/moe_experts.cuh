#pragma once
// Routed MoE experts (SwiGLU MLPs), per token over its TOPK chosen experts, in two kernels:
//
// moe_gate_up:  h[t, k, i] = silu(x[t] . Wg[e](i, :)) * (x[t] . Wu[e](i, :)),  e = topk_ids[t, k]
//   Launch: grid (ceil(I / WARPS), n_tokens * TOPK), block (32 * WARPS); one warp per i.
//   Arguments: x (X_DT, row t at t * x_row_stride), topk_ids (int32 [n_tokens, TOPK]),
//   w_gate, w_gate_scale, w_up, w_up_scale, h (f32 [n_tokens, TOPK, I], scratch), n_tokens,
//   x_row_stride, n_experts.
//
// moe_down:     out[t, j] = (ACC ? out[t, j] : 0) + sum_k topk_weights[t, k] * (h[t, k] . Wd[e](j, :))
//   Launch: grid (ceil(H / WARPS), n_tokens), block (32 * WARPS); one warp per j.
//   Arguments: h, topk_ids, topk_weights (f32 [n_tokens, TOPK]), w_down, w_down_scale, out
//   (Y_DT, row t at t * out_row_stride), n_tokens, out_row_stride, n_experts.
//
// Expert weights are stacked per projection, experts contiguous:
//   W_FMT 0 (bf16):  Wg, Wu [E, I, H];  Wd [E, H, I]; the *_scale arguments are unused (null)
//   W_FMT 1 (INT4, compressed-tensors pack-quantized, group 32, see weight_dot.cuh):
//                    Wg, Wu int32 [E, I, H/8] with scales bf16 [E, I, H/32];
//                    Wd int32 [E, H, I/8] with scales bf16 [E, H, I/32]
// Expert ids are clamped to [0, n_experts) (graph warm-up safety).
//
// Template parameters: H (hidden), I (moe_intermediate_size), TOPK, W_FMT (0 bf16, 1 int4),
// X_DT / Y_DT activation element types, ACC (moe_down: add into out, e.g. onto the shared
// experts' output), WARPS warps per block.
#include "weight_dot.cuh"

namespace kp {

template <int K, int W_FMT, int X_DT>
__device__ __forceinline__ float expert_row_dot(const void* w, const void* w_scale, i64 row, const void* x) {
  float acc[1] = {0.f};
  if constexpr (W_FMT == 0) {
    dot_bf16<K, X_DT, 1>(static_cast<const unsigned short*>(w) + row * K, x, 0, 1, acc);
  } else {
    dot_int4<K, X_DT, 1>(static_cast<const int*>(w) + row * (K / 8),
                         static_cast<const unsigned short*>(w_scale) + row * (K / 32), x, 0, 1, acc);
  }
  return warp_sum(acc[0]);
}

template <int H, int I, int TOPK, int W_FMT, int X_DT, int WARPS>
__device__ void moe_gate_up(const void* x, const void* topk_ids, const void* w_gate,
                            const void* w_gate_scale, const void* w_up, const void* w_up_scale,
                            void* h, int n_tokens, int x_row_stride, int n_experts) {
  const int i = blockIdx.x * WARPS + threadIdx.x / 32;
  const int tk = blockIdx.y;  // t * TOPK + k
  const int t = tk / TOPK;
  if (i >= I || t >= n_tokens) return;
  const int e = clamp_int(static_cast<const int*>(topk_ids)[tk], 0, n_experts - 1);
  const void* xt = offset<X_DT>(x, static_cast<i64>(t) * x_row_stride);
  const i64 row = static_cast<i64>(e) * I + i;
  const float g = expert_row_dot<H, W_FMT, X_DT>(w_gate, w_gate_scale, row, xt);
  const float u = expert_row_dot<H, W_FMT, X_DT>(w_up, w_up_scale, row, xt);
  if (threadIdx.x % 32 == 0) static_cast<float*>(h)[static_cast<i64>(tk) * I + i] = silu(g) * u;
}

template <int H, int I, int TOPK, int W_FMT, int Y_DT, int ACC, int WARPS>
__device__ void moe_down(const void* h, const void* topk_ids, const void* topk_weights,
                         const void* w_down, const void* w_down_scale, void* out, int n_tokens,
                         int out_row_stride, int n_experts) {
  const int j = blockIdx.x * WARPS + threadIdx.x / 32;
  const int t = blockIdx.y;
  if (j >= H || t >= n_tokens) return;
  float total = 0.f;
  for (int k = 0; k < TOPK; ++k) {
    const i64 tk = static_cast<i64>(t) * TOPK + k;
    const int e = clamp_int(static_cast<const int*>(topk_ids)[tk], 0, n_experts - 1);
    const float* hk = static_cast<const float*>(h) + tk * I;
    total += static_cast<const float*>(topk_weights)[tk] *
             expert_row_dot<I, W_FMT, F32>(w_down, w_down_scale, static_cast<i64>(e) * H + j, hk);
  }
  if (threadIdx.x % 32 == 0) {
    const i64 o = static_cast<i64>(t) * out_row_stride + j;
    store<Y_DT>(out, o, ACC ? load<Y_DT>(out, o) + total : total);
  }
}

}  // namespace kp
