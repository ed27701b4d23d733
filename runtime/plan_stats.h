#pragma once
// What one AR decode step of a plan must read from device memory, for `kplan bench`'s achieved
// bandwidth: every target weight once, except the embedding (one row) and the routed experts
// (top-k of n_routed per MoE layer, the expected share for one token), plus the KV cache.
#include <cstdint>

#include "compiler/frontend/model_config.h"
#include "compiler/plan/plan_model.h"

namespace kplan {

struct PlanTraffic {
  uint64_t weight_bytes = 0;         // all weights in the plan
  uint64_t decode_weight_bytes = 0;  // weights one target decode step reads
  uint64_t kv_bytes_per_token = 0;   // KV cache bytes per cached position, all caches
};

PlanTraffic plan_traffic(const plan::Plan& plan, const ModelConfig& config);

}  // namespace kplan
