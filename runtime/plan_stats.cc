#include "runtime/plan_stats.h"

#include <string>

namespace kplan {

PlanTraffic plan_traffic(const plan::Plan& plan, const ModelConfig& config) {
  PlanTraffic t;
  const std::string model = config.tensor_prefix + "model.";
  const std::string head = config.tensor_prefix + "lm_head.";
  const double expert_share = config.n_routed_experts > 0
                                  ? static_cast<double>(config.num_experts_per_tok) / static_cast<double>(config.n_routed_experts)
                                  : 1.0;
  double decode = 0;
  for (const plan::Weight& w : plan.weights) {
    uint64_t size = w.size ? w.size : w.data().size();
    t.weight_bytes += size;
    bool target = w.name.rfind(model, 0) == 0 || w.name.rfind(head, 0) == 0;
    if (!target) continue;  // drafter weights: not part of a target step
    if (w.name.find("embed_tokens") != std::string::npos && config.vocab_size > 0)
      decode += static_cast<double>(size) / static_cast<double>(config.vocab_size);
    else if (w.name.find(".mlp.experts.") != std::string::npos)
      decode += static_cast<double>(size) * expert_share;
    else
      decode += static_cast<double>(size);
  }
  t.decode_weight_bytes = static_cast<uint64_t>(decode);
  for (const plan::KvCache& kv : plan.kv_caches) t.kv_bytes_per_token += kv.row_bytes;
  return t;
}

}  // namespace kplan
