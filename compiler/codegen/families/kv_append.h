#pragma once
// Kernel family kv_append: kernels_templates/kv_cache.cuh (kp::kv_append).
// Appends this step's latent + rope rows to one layer's MLA cache, in place (rows L .. L+T-1).
//
// Template parameters (compile-time constants, template order):
//   C, R, SRC_DT (dtype), KV_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/kv_append.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::kv_append {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(latent_src);         // SRC_DT, row t at t * latent_src_stride
  KPLAN_PTR(rope_src);           // SRC_DT, row t at t * rope_src_stride
  KPLAN_PTR(cache);              // KV_DT [max_slots, C + R], written in place
  KPLAN_PTR(cache_len);          // int32 [1]: L
  KPLAN_I32(n_tokens);           // rows to append (= grid.x)
  KPLAN_I32(latent_src_stride);  // elements
  KPLAN_I32(rope_src_stride);    // elements
  KPLAN_I32(max_slots);          // rows of the cache (clamp)
};

const Family& family();

}  // namespace kplan::codegen::kv_append

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource kv_append_kernel(int64_t kv_lora, int64_t rope, ElemType src, ElemType kv, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
