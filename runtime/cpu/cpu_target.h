#pragma once
// The target model (DeepSeek-V3 / Kimi K2.x) on the CPU: the plan's own @target run by the
// interpreter for every step, and its @target_commit for every commit. The KV state is what the
// IR says it is: per layer, committed rows [S, kv_lora + rope] (normed latent | roped k) and the
// last step's pending rows [T, kv_lora + rope].
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/weight_table.h"
#include "runtime/step_model.h"
#include "schemas/plan_model.h"

namespace kplan::cpu {

class CpuTarget final : public TargetModel {
 public:
  // `max_context` <= 0: the plan's limits, else the spec's max_position_embeddings; negative
  // is refused. `weights`: the model's table over plan->weights, shared by its sessions (null:
  // a table of this target's own). Throws kplan::Error naming `source` for an IR or weight the
  // plan gets wrong.
  CpuTarget(std::shared_ptr<const plan::Plan> plan, const std::string& source, int64_t max_context,
            std::shared_ptr<const WeightTable> weights = nullptr);

  const ModelConfig& config() const override { return plan_->model; }
  StepOutput forward(const StepInput& in) override;
  void commit(std::span<const int32_t> keep) override;
  int64_t cache_length() const override { return committed_; }
  int64_t max_context() const override { return max_context_; }
  void reset() override;
  // Only layers whose output the plan's @target returns ("hidden.L") can be captured.
  void set_capture_layers(std::vector<int64_t> layer_ids) override;

  // The last forward()'s router margins per row (Interpreter::router_margins): where one is
  // small, a device rounding its inputs differently may route that row otherwise.
  const std::vector<float>& router_margins() const { return step_->router_margins(); }

  // The plan's IR as parsed: @target and @target_commit (and the drafter's functions).
  const ir::Module& module() const { return *module_; }

 private:
  std::shared_ptr<const plan::Plan> plan_;
  std::string source_;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<Interpreter> step_, commit_;
  bool takes_tree_mask_ = false;
  std::set<int64_t> capturable_;  // layers @target outputs
  int64_t kv_row_ = 0;            // cache row width, from the IR's kv.0 argument
  int64_t max_context_;
  int64_t committed_ = 0;
  int64_t pending_ = 0;
  std::vector<TensorPtr> kv_, kv_step_;  // per layer
  std::vector<int64_t> capture_layers_;
};

}  // namespace kplan::cpu
