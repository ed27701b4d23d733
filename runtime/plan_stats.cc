#include "runtime/plan_stats.h"

#include <cmath>
#include <string>

namespace kplan {

double PlanTraffic::step_weight_bytes(int64_t tokens) const {
  const double touched = 1.0 - std::pow(1.0 - expert_pick, static_cast<double>(tokens));
  return static_cast<double>(dense_bytes) + static_cast<double>(embed_row_bytes) * static_cast<double>(tokens) +
         static_cast<double>(expert_bytes) * touched;
}

PlanTraffic plan_traffic(const plan::Plan& plan, const ModelConfig& config) {
  PlanTraffic t;
  const std::string model = config.tensor_prefix + "model.";
  const std::string head = config.tensor_prefix + "lm_head.";
  if (config.n_routed_experts > 0)
    t.expert_pick = static_cast<double>(config.num_experts_per_tok) / static_cast<double>(config.n_routed_experts);
  for (const plan::Weight& w : plan.weights) {
    uint64_t size = w.size ? w.size : w.data().size();
    t.weight_bytes += size;
    bool target = w.name.rfind(model, 0) == 0 || w.name.rfind(head, 0) == 0;
    if (!target) continue;  // drafter weights: not part of a target step
    if (w.name.find("embed_tokens") != std::string::npos && config.vocab_size > 0)
      t.embed_row_bytes += size / static_cast<uint64_t>(config.vocab_size);
    else if (w.name.find(".mlp.experts.") != std::string::npos)
      t.expert_bytes += size;
    else
      t.dense_bytes += size;
  }
  t.decode_weight_bytes = static_cast<uint64_t>(t.step_weight_bytes(1));
  for (const plan::KvCache& kv : plan.kv_caches) t.kv_bytes_per_token += kv.row_bytes;
  return t;
}

}  // namespace kplan
