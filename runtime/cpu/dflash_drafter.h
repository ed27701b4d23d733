#pragma once
// The DFlash block-diffusion drafter on the CPU, as z-lab's DFlashDraftModel computes it:
// context features = hidden_norm(fc(concat of the target's capture-layer outputs)); each
// Qwen3-style layer attends, non-causally, from the block [bonus, mask x (block_size-1)]
// over [context ; block]; final `norm` (the drafter's own), then the TARGET's lm_head.
// Context K/V are cached across rounds; the block's K/V are dropped after each propose.
#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/frontend/draft_config.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/target_weights.h"
#include "runtime/cpu/weight_loader.h"
#include "runtime/step_model.h"

namespace kplan::cpu {

struct DraftLayerWeights {
  std::vector<float> input_norm, post_attention_norm, q_norm, k_norm;
  Matrix q, k, v, o;  // q [Hq*D, hidden], k/v [Hkv*D, hidden], o [hidden, Hq*D]
  Matrix gate, up, down;
};

struct DraftWeights {
  Matrix fc;                       // [hidden, n_capture * hidden]
  std::vector<float> hidden_norm;  // [hidden]
  std::vector<DraftLayerWeights> layers;
  std::vector<float> norm;         // [hidden]
};

DraftWeights load_draft_weights(const DraftConfig& config, const WeightLoader& loader);

class CpuDFlashDrafter final : public Drafter {
 public:
  CpuDFlashDrafter(DraftConfig config, DraftWeights weights,
                   std::shared_ptr<const TargetWeights> target);

  void observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
               const std::vector<Matrix>& captured) override;
  // log_softmax of block_logits() rows 1..block_size-1.
  Matrix propose(int32_t bonus_token, int32_t bonus_position) override;
  std::vector<int64_t> capture_layers() const override { return config_.target_layer_ids; }
  int64_t max_depth() const override { return config_.block_size - 1; }
  void reset() override;

  // Raw logits [block_size, vocab] of the whole block (row 0 is the bonus token's own row).
  Matrix block_logits(int32_t bonus_token, int32_t bonus_position) const;
  const DraftConfig& config() const { return config_; }
  int64_t context_length() const { return context_length_; }

 private:
  DraftConfig config_;
  DraftWeights weights_;
  std::shared_ptr<const TargetWeights> target_;
  Rope rope_;
  int64_t context_length_ = 0;
  // Per drafter layer: context keys (k_norm'ed, rotated) and values, [context, Hkv*D].
  std::vector<std::vector<float>> ctx_k_, ctx_v_;
};

}  // namespace kplan::cpu
