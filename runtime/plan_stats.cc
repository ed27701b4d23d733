#include "runtime/plan_stats.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
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

namespace {

int64_t constant(const plan::Kernel& k, const char* name, int64_t fallback = 0) { return k.constant(name).value_or(fallback); }

// The I32 argument named `name`, else `fallback`.
int64_t i32_arg(const plan::Kernel& k, const plan::Launch& l, const char* name, int64_t fallback) {
  const std::optional<size_t> a = k.param_index(name);
  return a && *a < l.args.size() && l.args[*a].kind == plan::ArgKind::I32 ? l.args[*a].ival : fallback;
}

double elem_bytes(int64_t dtype_code) { return dtype_code == 0 ? 4.0 : 2.0; }  // kp::F32 / kp::BF16

}  // namespace

std::vector<LaunchTraffic> launch_traffic(const plan::Plan& plan, const plan::Bucket& bucket, int64_t context,
                                          double expert_share) {
  const double tokens = static_cast<double>(bucket.tokens);
  if (expert_share < 0) {
    const ModelConfig& c = plan.model;
    const double pick = c.n_routed_experts > 0 ? static_cast<double>(c.num_experts_per_tok) / static_cast<double>(c.n_routed_experts) : 1.0;
    expert_share = 1.0 - std::pow(1.0 - pick, tokens);
  }
  uint32_t max_tokens = 1;
  for (const plan::Bucket& b : plan.buckets)
    if (b.program == bucket.program) max_tokens = std::max(max_tokens, b.tokens);
  const double slot_share = std::min(1.0, tokens / static_cast<double>(max_tokens));
  std::vector<const plan::KvCache*> kv_of_slot(plan.buffers.slots.size(), nullptr);
  for (const plan::KvCache& kv : plan.kv_caches)
    if (kv.slot < kv_of_slot.size()) kv_of_slot[kv.slot] = &kv;

  std::vector<LaunchTraffic> out;
  out.reserve(bucket.launches.size());
  std::set<uint32_t> charged;  // weights a launch of the step has been charged for
  for (const plan::Launch& l : bucket.launches) {
    const plan::Kernel& k = plan.kernels.at(l.kernel);
    LaunchTraffic t;
    const double n_tokens = static_cast<double>(i32_arg(k, l, "n_tokens", bucket.tokens));
    bool weights_done = false, activations_done = false;
    // A fused norm (NORM 1 / 2): its bf16 weight, and with 2 the norm's result rows written.
    const auto norm_bytes = [&](double K, double& weight_bytes, double& activation_bytes) {
      const int64_t norm = constant(k, "NORM");
      if (norm > 0) weight_bytes += K * 2.0;
      if (norm == 2) activation_bytes += n_tokens * K * elem_bytes(constant(k, "X_DT"));
    };
    if (k.family == "matmul" || k.family == "matmul_int4" || k.family == "cublaslt_matmul") {
      const double K = static_cast<double>(constant(k, "K")), N = static_cast<double>(constant(k, "N"));
      const double batch = static_cast<double>(l.grid[2]);  // a cuBLASLt call's: 1
      t.weight_bytes = k.family == "matmul_int4" ? N * K / 2.0 + N * (K / 32.0) * 2.0 : batch * K * N * 2.0;
      t.activation_bytes = batch * n_tokens *
                           (K * elem_bytes(constant(k, "X_DT")) + N * elem_bytes(constant(k, "Y_DT")) * (constant(k, "ACC") ? 2.0 : 1.0));
      if (k.family == "matmul") {
        norm_bytes(K, t.weight_bytes, t.activation_bytes);
        t.activation_bytes += n_tokens * static_cast<double>(constant(k, "ROUTED")) * N * 4.0;  // a MoE combine's f32 pair rows
      }
      weights_done = activations_done = true;
    } else if (k.family == "matmul_siblings") {  // each sibling's weight once, x once, each y
      const double K = static_cast<double>(constant(k, "K"));
      const double N = static_cast<double>(constant(k, "N") + constant(k, "N2") + constant(k, "N3"));
      t.weight_bytes = K * N * 2.0;
      t.activation_bytes = n_tokens * (K * elem_bytes(constant(k, "X_DT")) + N * elem_bytes(constant(k, "Y_DT")));
      norm_bytes(K, t.weight_bytes, t.activation_bytes);
      weights_done = activations_done = true;
    } else if (k.family == "mla_split_combine_uv") {  // W_UV's heads once; every split's partials read, y written
      const double H = static_cast<double>(constant(k, "HEADS")), C = static_cast<double>(constant(k, "C"));
      const double N = static_cast<double>(constant(k, "N")), splits = static_cast<double>(i32_arg(k, l, "n_splits", 1));
      t.weight_bytes = H * N * C * 2.0;
      t.activation_bytes = n_tokens * H * (splits * (C + 2.0) * 4.0 + N * elem_bytes(constant(k, "O_DT")));
      weights_done = activations_done = true;
    } else if (k.family == "embedding") {
      const double H = static_cast<double>(constant(k, "H"));
      t.weight_bytes = n_tokens * H * 2.0;
      t.activation_bytes = n_tokens * (4.0 + H * elem_bytes(constant(k, "OUT_DT")));
      weights_done = activations_done = true;
    } else if (k.family == "embedding_norm") {  // the gathered rows and the norm's weight; rows and normed rows written
      const double H = static_cast<double>(constant(k, "H"));
      t.weight_bytes = n_tokens * H * 2.0 + H * 2.0;
      t.activation_bytes = n_tokens * (4.0 + H * (elem_bytes(constant(k, "OUT_DT")) + elem_bytes(constant(k, "Y_DT"))));
      weights_done = activations_done = true;
    } else if (k.family == "uk_rope_append") {  // W_UK's heads (matmul's bytes), then the rope-append's rows and cache rows
      const double K = static_cast<double>(constant(k, "K")), N = static_cast<double>(constant(k, "N"));
      const double H = static_cast<double>(constant(k, "HEADS")), C = static_cast<double>(constant(k, "C"));
      const double R = static_cast<double>(constant(k, "R")), x = elem_bytes(constant(k, "X_DT"));
      t.weight_bytes = H * K * N * 2.0 + C * 2.0;
      t.activation_bytes = n_tokens * (H * (K * x + N * elem_bytes(constant(k, "Y_DT"))) + (C + R) * (x + elem_bytes(constant(k, "KV_DT"))) +
                                       H * R * (x + elem_bytes(constant(k, "Q_DT"))));
      weights_done = activations_done = true;
    } else if (k.family == "add_norm") {  // the norm's weight; both operands read, the sum and normed rows written
      const double H = static_cast<double>(constant(k, "H"));
      t.weight_bytes = H * 2.0;
      t.activation_bytes = n_tokens * H *
                           (elem_bytes(constant(k, "A_DT")) + elem_bytes(constant(k, "B_DT")) + elem_bytes(constant(k, "O_DT")) +
                            elem_bytes(constant(k, "Y_DT")));
      weights_done = activations_done = true;
    }
    std::set<uint32_t> weights;
    std::set<std::pair<uint32_t, uint64_t>> slots;
    for (const plan::LaunchArg& a : l.args) {
      if (a.kind == plan::ArgKind::Weight && !weights_done && weights.insert(a.index).second && charged.insert(a.index).second) {
        const plan::Weight& w = plan.weights.at(a.index);
        const double size = static_cast<double>(w.size ? w.size : w.data().size());
        t.weight_bytes += w.name.find(".mlp.experts.") != std::string::npos ? size * expert_share : size;
      } else if (a.kind == plan::ArgKind::Buffer && !activations_done && slots.insert({a.index, a.offset}).second) {
        const plan::BufferSlot& s = plan.buffers.slots.at(a.index);
        if (const plan::KvCache* kv = kv_of_slot[a.index]) {
          const double rows = std::min(static_cast<double>(kv->rows), static_cast<double>(context) + tokens);
          t.activation_bytes += static_cast<double>(kv->row_bytes) * rows;
        } else {
          t.activation_bytes += static_cast<double>(s.size - std::min(s.size, a.offset)) * slot_share;
        }
      }
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace kplan
