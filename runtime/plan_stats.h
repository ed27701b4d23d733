#pragma once
// What one target step of a plan must read from device memory, for `kplan bench`'s achieved
// bandwidth: every dense target weight once, one embedding row per token, the routed experts the
// step's tokens can touch, and the KV cache. For T tokens each picking top-k of E experts
// (uniformly, independently), the expected share of experts touched is 1 - (1 - k/E)^T.
#include <cstdint>

#include "schemas/model_spec.h"
#include "schemas/plan_model.h"

namespace kplan {

struct PlanTraffic {
  uint64_t weight_bytes = 0;         // all weights in the plan
  uint64_t dense_bytes = 0;          // target weights every step reads whole
  uint64_t embed_row_bytes = 0;      // one embedding row
  uint64_t expert_bytes = 0;         // all routed experts
  double expert_pick = 1.0;          // k / E
  uint64_t decode_weight_bytes = 0;  // weights one 1-token decode step reads
  uint64_t kv_bytes_per_token = 0;   // KV cache bytes per cached position, all caches

  // Weights a step of `tokens` tokens reads.
  double step_weight_bytes(int64_t tokens) const;
};

PlanTraffic plan_traffic(const plan::Plan& plan, const ModelConfig& config);

}  // namespace kplan
