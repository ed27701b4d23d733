#pragma once
// Kernel family cublaslt_matmul: a library call, not a template (Family::library "cublaslt").
// y = x W^T (+ residual) for a step of many tokens, through cuBLASLt's matmul: bf16 x and W,
// f32 accumulation, y in Y_DT. The prefill chunks' dense matmuls take it from
// heuristics' matmul_library_min_tokens tokens on, where cuBLASLt's compute-bound tiles beat the
// templates' weight streams (bench/RESULTS.md); the runtime makes the call
// (runtime/gpu/library_matmul.h), the launch emulator computes it with the CPU op.
//
// The call, in cuBLASLt's column-major terms: D [N, T] = op(A) B (+ C), with A = W read as a
// column-major [K, N] (ld K) and transposed, B = x as a column-major [K, T] (ld x_row_stride),
// C = residual and D = y as column-major [N, T] (ld y_row_stride); compute type 32F, scale 1,
// beta 1 with ACC 1 (C may be D: in place), else 0.
//
// Constants (template order, as the plan records them):
//   K, N     the weight's [N, K] shape
//   X_DT     x's element type: bf16 only (cuBLASLt takes A and B of one type)
//   Y_DT     y's (and residual's) element type: f32 or bf16
//   ACC      1: y = residual + x W^T; 0: y = x W^T, residual unread
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::cublaslt_matmul {

// Launch arguments, in the call's order.
struct Args {
  KPLAN_PTR(x);             // bf16; row t at t * x_row_stride
  KPLAN_PTR(w);             // bf16 [N, K], contiguous
  KPLAN_PTR(y);             // Y_DT; row t at t * y_row_stride
  KPLAN_PTR(residual);      // Y_DT, y's layout: ACC 1 adds it (may be y); ACC 0: unread
  KPLAN_I32(n_tokens);      // rows of x and y (the bucket's tokens)
  KPLAN_I32(x_row_stride);  // elements, >= K
  KPLAN_I32(y_row_stride);  // elements, >= N
};

const Family& family();

}  // namespace kplan::codegen::cublaslt_matmul

namespace kplan::codegen {

// The call for an [n, k] bf16 weight and bf16 activations, writing y in `y`.
KernelSource cublaslt_matmul_call(int64_t k, int64_t n, ElemType y, bool accumulate, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
