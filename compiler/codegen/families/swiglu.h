#pragma once
// Kernel family swiglu: kernels_templates/swiglu.cuh (kp::swiglu).
// SwiGLU activation: out[t, i] = silu(gate[t, i]) * up[t, i] (one block per token).
//
// Template parameters (compile-time constants, template order):
//   I, G_DT (dtype), U_DT (dtype), O_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/swiglu.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::swiglu {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(gate);             // row t at t * gate_row_stride
  KPLAN_PTR(up);               // row t at t * up_row_stride
  KPLAN_PTR(out);              // row t at t * out_row_stride
  KPLAN_I32(n_tokens);         // rows (= grid.x)
  KPLAN_I32(gate_row_stride);  // elements
  KPLAN_I32(up_row_stride);    // elements
  KPLAN_I32(out_row_stride);   // elements
};

const Family& family();

}  // namespace kplan::codegen::swiglu

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource swiglu_kernel(int64_t width, ElemType gate, ElemType up, ElemType out, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
