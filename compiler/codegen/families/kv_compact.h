#pragma once
// Kernel family kv_compact: kernels_templates/kv_cache.cuh (kp::kv_compact).
// Keeps a verify step's accepted rows of one layer's cache, in place: row L + keep[i] -> L + i.
//
// Template parameters (compile-time constants, template order):
//   C, R, KV_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/kv_compact.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::kv_compact {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(cache);      // KV_DT [max_slots, C + R], compacted in place
  KPLAN_PTR(cache_len);  // int32 [1]: L
  KPLAN_PTR(keep);       // int32 [max_keep], increasing
  KPLAN_PTR(n_keep);     // int32 [1]: rows kept
  KPLAN_I32(max_keep);   // capacity of keep (clamp)
  KPLAN_I32(max_slots);  // rows of the cache (clamp)
};

const Family& family();

}  // namespace kplan::codegen::kv_compact

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource kv_compact_kernel(int64_t kv_lora, int64_t rope, ElemType kv, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
