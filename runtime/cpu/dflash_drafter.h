#pragma once
// The DFlash block-diffusion drafter on the CPU (z-lab dflash model.py semantics): the plan's
// own @draft_context (context features = hidden_norm(fc(concat of the target's capture-layer
// outputs)) -> per-layer context K/V, appended to the drafter's cache) and @draft (the block
// [bonus, mask x (block_size-1)] embedded with the TARGET's embedding, Qwen3-style layers
// attending non-causally over [context ; block], the drafter's own final norm, the TARGET's
// lm_head). Context K/V persist across rounds; the block's K/V are never stored. It reads the
// target's weights from the plan, not from a target model, so any target that returns the
// capture layers' hidden states (CPU or GPU) can drive it.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/weight_table.h"
#include "runtime/step_model.h"
#include "schemas/plan_model.h"

namespace kplan::cpu {

class CpuDFlashDrafter final : public Drafter {
 public:
  // Throws kplan::Error naming `source` when the plan has no drafter (Plan::draft, @draft,
  // @draft_context) or lacks a weight its IR names.
  // `weights`: the model's table over plan->weights (null: its own).
  CpuDFlashDrafter(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                   std::shared_ptr<const WeightTable> weights = nullptr);

  void observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
               const std::vector<Matrix>& captured) override;
  // log_softmax of depth_logits().
  Matrix propose(int32_t bonus_token, int32_t bonus_position) override;
  // The plan's @draft candidates (its top_log_probs / top_ids outputs) when they cover k.
  DepthCandidates propose_top(int32_t bonus_token, int32_t bonus_position, int64_t depth, int64_t k) override;
  std::vector<int64_t> capture_layers() const override { return config().target_layer_ids; }
  int64_t max_depth() const override { return config().block_size - 1; }
  void reset() override;

  // Raw logits [block_size - 1, vocab]: row d-1 is the distribution for position bonus + d.
  Matrix depth_logits(int32_t bonus_token, int32_t bonus_position) const;
  const DraftConfig& config() const { return *plan_->draft; }
  int64_t context_length() const { return context_length_; }

 private:
  std::map<std::string, TensorPtr> run_draft(int32_t bonus_token, int32_t bonus_position) const;

  std::shared_ptr<const plan::Plan> plan_;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<Interpreter> context_, draft_;
  int64_t context_length_ = 0;
  std::vector<TensorPtr> dk_, dv_;  // per drafter layer, [context, kv_heads * head_dim]
};

}  // namespace kplan::cpu
