#pragma once
// Kernel family synthetic_weights: kernels_templates/synthetic_weights.cuh (kp::synthetic_weights).
// Not an op's kernel: a plan compiled with --synthetic-weights carries one instance per kind of
// synthetic weight, and the runtime launches it once per such weight at load
// (runtime/gpu/synthetic_weights.cc) to write the values ir/support/synthetic_values.h defines.
//
// Template parameters (compile-time constants, template order):
//   KIND (0 normal, 1 INT4 packed words, 2 INT4 bf16 scales), OUT_DT (dtype), GROUP, THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry.
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::synthetic_weights {

// Launch arguments, in the kernel's parameter order (the runtime builds them from the weight's
// plan entry; plan_model.h SyntheticInit).
struct Args {
  KPLAN_PTR(out);     // the weight's device bytes
  KPLAN_I32(n_lo);    // units to write (elements, words or groups), low 32 bits
  KPLAN_I32(n_hi);    // high 32 bits
  KPLAN_I32(key_lo);  // synthetic::weight_key(seed, stream), low 32 bits
  KPLAN_I32(key_hi);  // high 32 bits
  KPLAN_F32(mean);
  KPLAN_F32(step);
};

const Family& family();

}  // namespace kplan::codegen::synthetic_weights

namespace kplan::codegen {

// The instance for one kind (synthetic::kNormal / kInt4Packed / kInt4Scale), output dtype and
// INT4 group (0 for kNormal).
// `frag_k`: 0, or the row length of a weight whose device copy is in ir/support/int4_frag.h's order.
KernelSource synthetic_weights_kernel(int kind, ElemType out, int64_t group, std::string_view arch = kDefaultArch, int64_t frag_k = 0);

}  // namespace kplan::codegen
