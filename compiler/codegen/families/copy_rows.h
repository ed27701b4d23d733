#pragma once
// Kernel family copy_rows: kernels_templates/copy_rows.cuh (kp::copy_rows).
// Strided row copy with element type conversion (materialises views other kernels cannot read).
//
// Template parameters (compile-time constants, template order):
//   COLS, X_DT (dtype), Y_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/copy_rows.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::copy_rows {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);         // row r at r * x_stride
  KPLAN_PTR(y);         // row r at r * y_stride
  KPLAN_I32(n_rows);    // rows (= grid.x)
  KPLAN_I32(x_stride);  // elements
  KPLAN_I32(y_stride);  // elements
};

const Family& family();

}  // namespace kplan::codegen::copy_rows

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource copy_rows_kernel(int64_t cols, ElemType x, ElemType y, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
