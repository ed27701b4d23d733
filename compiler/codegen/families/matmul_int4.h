#pragma once
// Kernel family matmul_int4: kernels_templates/matmul_int4.cuh (kp::matmul_int4).
// Matmul with compressed-tensors pack-quantized INT4 weights (group 32), dequantised in registers.
//
// Template parameters (compile-time constants, template order):
//   K, N, X_DT (dtype), Y_DT (dtype), ACC, WARPS, TOK_TILE, RPW, KSPLIT, UNROLL (the last five tuning)
// See the template's doc block for their meaning and the launch geometry (families/matmul_int4.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::matmul_int4 {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);             // X_DT [n_tokens, K] with row stride x_row_stride
  KPLAN_PTR(w_packed);      // int32 [N, K / 8]
  KPLAN_PTR(w_scale);       // bf16 [N, K / 32]
  KPLAN_PTR(y);             // Y_DT [n_tokens, N] with row stride y_row_stride
  KPLAN_I32(n_tokens);      // tokens in this step
  KPLAN_I32(x_row_stride);  // elements
  KPLAN_I32(y_row_stride);  // elements
};

const Family& family();

}  // namespace kplan::codegen::matmul_int4

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource matmul_int4_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool accumulate = false,
                                std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
