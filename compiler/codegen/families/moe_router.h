#pragma once
// Kernel family moe_router: kernels_templates/moe_router.cuh (kp::moe_router).
// DeepSeek-V3 "noaux_tc" router (sigmoid, correction bias, group-limited top-k, normalise, scale).
//
// Template parameters (compile-time constants, template order):
//   E, TOPK, N_GROUP, TOPK_GROUP, NORM, WARPS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/moe_router.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"
#include "compiler/frontend/model_config.h"

namespace kplan::codegen::moe_router {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(logits);          // f32 [n_tokens, E]
  KPLAN_PTR(bias);            // f32 [E]
  KPLAN_PTR(topk_ids);        // int32 [n_tokens, TOPK] (out)
  KPLAN_PTR(topk_weights);    // f32 [n_tokens, TOPK] (out)
  KPLAN_I32(n_tokens);        // tokens in this step
  KPLAN_F32(routed_scaling);  // routed_scaling_factor
};

const Family& family();

}  // namespace kplan::codegen::moe_router

namespace kplan::codegen {

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource moe_router_kernel(const ModelConfig& c, std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
