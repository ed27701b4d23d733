#pragma once
// What one target step of a plan must read from device memory, for `kplan bench`'s achieved
// bandwidth: every dense target weight once, one embedding row per token, the routed experts the
// step's tokens can touch, and the KV cache. For T tokens each picking top-k of E experts
// (uniformly, independently), the expected share of experts touched is 1 - (1 - k/E)^T.
#include <cstdint>
#include <vector>

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

// What one launch of a step moves (kplan bench --kernels: bytes over its time against the HBM
// floor). Weights: the matmul families' exactly (batch * K * N of the instance: a view of part of
// a weight, W_UK / W_UV in kv_b, counts only its part), the embedding's rows of the step's tokens,
// routed experts (".mlp.experts." weights) times `expert_share` (the share of experts the step's
// tokens touch), any other weight whole, charged to the first launch of the step that names it
// (a kernel may pass a weight again for an argument its instance never reads: bf16 experts'
// scale pointers). Activations: the matmul
// families' x and y exactly (y twice with ACC); a KV cache slot's rows up to context + tokens;
// any other slot its share at the bucket's tokens of a slot sized for the plan's largest bucket.
struct LaunchTraffic {
  double weight_bytes = 0;
  double activation_bytes = 0;
  double bytes() const { return weight_bytes + activation_bytes; }
};

// One entry per launch of `bucket`, in order. expert_share < 0: the expected share of uniform
// top-k picks, 1 - (1 - k/E)^tokens.
std::vector<LaunchTraffic> launch_traffic(const plan::Plan& plan, const plan::Bucket& bucket, int64_t context,
                                          double expert_share = -1);

}  // namespace kplan
