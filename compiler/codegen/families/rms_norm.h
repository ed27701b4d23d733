#pragma once
// Kernel family rms_norm: kernels_templates/rms_norm.cuh (kp::rms_norm).
// RMSNorm over rows of length D (one block per row).
//
// Template parameters (compile-time constants, template order):
//   D, X_DT (dtype), Y_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/rms_norm.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::rms_norm {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);         // X_DT rows; row r starts at x + r * x_stride
  KPLAN_PTR(weight);    // bf16 [D]
  KPLAN_PTR(y);         // Y_DT rows; row r starts at y + r * y_stride (may alias x when types match)
  KPLAN_I32(n_rows);    // rows to normalise (= grid.x)
  KPLAN_I32(x_stride);  // elements between rows of x
  KPLAN_I32(y_stride);  // elements between rows of y
  KPLAN_F32(eps);       // added to the mean square
};

const Family& family();

}  // namespace kplan::codegen::rms_norm

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource rms_norm_kernel(int64_t d, ElemType x, ElemType y, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
