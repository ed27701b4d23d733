#pragma once
// Kernel family embedding: kernels_templates/embedding.cuh (kp::embedding).
// Embedding gather: out[t, :] = table[ids[t], :] (one block per token).
//
// Template parameters (compile-time constants, template order):
//   H, OUT_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/embedding.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::embedding {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(ids);       // int32 [n_tokens]; clamped to [0, vocab) by the kernel
  KPLAN_PTR(table);     // bf16 [vocab, H]
  KPLAN_PTR(out);       // OUT_DT [n_tokens, H], contiguous
  KPLAN_I32(n_tokens);  // rows to gather (= grid.x)
  KPLAN_I32(vocab);     // rows in table
};

const Family& family();

}  // namespace kplan::codegen::embedding

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource embedding_kernel(int64_t hidden, ElemType out, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
