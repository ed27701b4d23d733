#pragma once
// Kernel family matmul_siblings: kernels_templates/matmul_siblings.cuh (kp::matmul_siblings).
// Two or three bf16 [N_i, K] matmuls of the same activations in one launch (q_a + kv_a, a router
// with the shared expert's gate and up, an MLP's gate and up).
//
// Template parameters (compile-time constants, template order):
//   K, N, N2, N3, GLU, NORM, X_DT (dtype), Y_DT (dtype), WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, MMA, XPF (those seven
//   tuning), YA_F32 (1: y, the first sibling's, f32 whatever Y_DT; in the id only when 1)
// See the template's doc block for their meaning and the launch geometry (families/matmul_siblings.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::matmul_siblings {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);              // X_DT; row t at t * x_row_stride
  KPLAN_PTR(w);              // bf16 [N, K]
  KPLAN_PTR(w2);             // bf16 [N2, K]
  KPLAN_PTR(w3);             // bf16 [N3, K] (N3 0: unread)
  KPLAN_PTR(y);              // Y_DT (YA_F32 1: f32); row t at t * y_row_stride
  KPLAN_PTR(y2);             // Y_DT; row t at t * y2_row_stride (GLU 1: silu(gate) * up)
  KPLAN_PTR(y3);             // Y_DT; row t at t * y3_row_stride (N3 0: unwritten)
  KPLAN_I32(n_tokens);       // tokens (rows of x) in this step
  KPLAN_I32(x_row_stride);   // elements
  KPLAN_I32(y_row_stride);   // elements
  KPLAN_I32(y2_row_stride);  // elements
  KPLAN_I32(y3_row_stride);  // elements
  KPLAN_PTR(norm_weight);    // NORM: bf16 [K], x is read as rms_norm(x, norm_weight); NORM 0: unread
  KPLAN_PTR(norm_out);       // NORM 2: X_DT [n_tokens, K], the norm's result rows; otherwise unwritten
  KPLAN_F32(eps);            // NORM: the norm's eps
  KPLAN_PTR(bias);           // ROUTE_K: f32 [N], the router's score correction bias; otherwise unread
  KPLAN_PTR(topk_ids);       // ROUTE_K: int32 [n_tokens, ROUTE_K], written; otherwise unwritten
  KPLAN_PTR(topk_weights);   // ROUTE_K: f32 [n_tokens, ROUTE_K], written; otherwise unwritten
  KPLAN_PTR(route_count);    // ROUTE_K: uint32, a persistent word that is 0 between launches; otherwise untouched
  KPLAN_F32(routed_scaling); // ROUTE_K: the router's routed_scaling_factor
};

const Family& family();

}  // namespace kplan::codegen::matmul_siblings

namespace kplan::codegen {

// The instance for K and the siblings' rows (n3 0: two), tuned as the dense matmul's CUDA-core
// stream over n + n2 + n3 rows (heuristics' matmul_tiling); few_tokens 1 or 2: the 1-token or
// 2..8-token instance (token tiles of that size), 0: tiles of 8. glu: n2 / n3 are a gate and up
// pair whose SwiGLU the launch writes to y2 (the template's GLU 1; n may be 0). norm 1 / 2: x is
// read as rms_norm(x) (2: the norm's result also written; the template's NORM). rows_m_tokens > 0:
// the rows-as-M tensor-core instance (the template's MMA 2) with token tiles of that many (8 .. 32).
// first_f32: the first sibling's y is f32 whatever y (a router's logits beside bf16 siblings; YA_F32).
// route_k > 0: the launch routes the step from those logits too, top route_k (ROUTE_K; route_norm:
// the router's norm_topk_prob, RNORM).
KernelSource matmul_siblings_kernel(int64_t k, int64_t n, int64_t n2, int64_t n3, ElemType x, ElemType y,
                                    std::string_view arch = kDefaultArch, int64_t few_tokens = 0, bool glu = false, int64_t norm = 0,
                                    int64_t rows_m_tokens = 0, bool first_f32 = false, int64_t route_k = 0, bool route_norm = false);

}  // namespace kplan::codegen
