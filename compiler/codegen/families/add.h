#pragma once
// Kernel family add: kernels_templates/add.cuh (kp::add).
// Residual add over contiguous [n_tokens, D] rows (out may alias a or b).
//
// Template parameters (compile-time constants, template order):
//   D, A_DT (dtype), B_DT (dtype), O_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/add.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::add {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(a);         // A_DT [n_tokens, D]
  KPLAN_PTR(b);         // B_DT [n_tokens, D]
  KPLAN_PTR(out);       // O_DT [n_tokens, D]
  KPLAN_I32(n_tokens);  // rows (= grid.x)
};

const Family& family();

}  // namespace kplan::codegen::add

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource add_kernel(int64_t d, ElemType a, ElemType b, ElemType out, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
