#pragma once
// Kernel family matmul: kernels_templates/matmul.cuh (kp::matmul).
// Dense matmul with bf16 weights, batched over heads (W_LAYOUT 0: [N, K]; 1: [K, N]).
//
// Template parameters (compile-time constants, template order):
//   K, N, X_DT (dtype), Y_DT (dtype), W_LAYOUT, ACC, ROUTED, NORM, WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, MMA, PREFETCH, XPF (the
//   last eight tuning; MMA 0 CUDA cores, 1 tokens as mma's M, 2 rows as its M)
// See the template's doc block for their meaning and the launch geometry (families/matmul.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::matmul {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);               // X_DT; element (b, t, k) at b * x_batch_stride + t * x_row_stride + k
  KPLAN_PTR(w);               // bf16, batch b at b * w_batch_stride
  KPLAN_PTR(y);               // Y_DT; element (b, t, n) at b * y_batch_stride + t * y_row_stride + n
  KPLAN_PTR(residual);        // Y_DT, y's layout: ACC 1 adds it (may be y: in place); ACC 0: unread
  KPLAN_I32(n_tokens);        // tokens (rows of x) in this step
  KPLAN_I32(x_row_stride);    // elements
  KPLAN_I32(x_batch_stride);  // elements (0: one batch)
  KPLAN_I32(y_row_stride);    // elements
  KPLAN_I32(y_batch_stride);  // elements
  KPLAN_I32(w_batch_stride);  // elements
  KPLAN_PTR(norm_weight);     // NORM: bf16 [K], x is read as rms_norm(x, norm_weight); NORM 0: unread
  KPLAN_PTR(norm_out);        // NORM 2: X_DT [n_tokens, K], the norm's result rows; otherwise unwritten
  KPLAN_F32(eps);             // NORM: the norm's eps
  KPLAN_PTR(routed);          // ROUTED: f32 [n_tokens * ROUTED, N], a MoE layer's per-pair rows; otherwise unread
};

const Family& family();

// The rows-as-M tiles' constraints (MMA 2 and its XPF), checked alike by `family`'s instances and
// by matmul_siblings', which stream their row space through the same tiles.
void check_rows_m_tiles(const char* family, const ParamValues& p);

}  // namespace kplan::codegen::matmul

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc). mma_tokens > 0:
// the tensor-core instance ([N, K] weights only) with token tiles of mma_tokens (16 .. 64).
// few_tokens 1 or 2 (CUDA cores, [N, K]): the instance of 1-token (AR decode) or 2..8-token
// steps, token tiles of that size (fewer accumulators: more resident warps, K split finer).
// mma_rows > 0 (with mma_tokens): that many rows a warp and no K split (the wide instance of long
// steps, heuristics' matmul_wide_long_steps). norm 1 / 2: x is read as rms_norm(x) (2: the norm's
// result also written; the template's NORM), CUDA-core [N, K] instances only. routed > 0 (with
// accumulate): the epilogue also sums that many per-pair rows of a MoE layer (the template's
// ROUTED: the MoE combine in the shared expert's down projection). prefetch_kib > 0: the
// template's PREFETCH (heuristics' weight_prefetch_after_light_kib), else its tuning's.
KernelSource matmul_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool weight_kn = false, bool accumulate = false,
                           std::string_view arch = kDefaultArch, int64_t mma_tokens = 0, int64_t few_tokens = 0,
                           int64_t mma_rows = 0, int64_t norm = 0, int64_t routed = 0, int64_t prefetch_kib = 0);

// The rows-as-M tensor-core instance ([N, K] weights; the template's MMA 2): W's rows as mma's M,
// token tiles of `tokens` (8, 16, 24 or 32) as its N, for the few-token steps; norm and routed as
// matmul_kernel's.
KernelSource matmul_rows_m_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool accumulate, std::string_view arch, int64_t tokens,
                                  int64_t norm = 0, int64_t routed = 0, int64_t prefetch_kib = 0);

}  // namespace kplan::codegen
