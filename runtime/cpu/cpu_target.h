#pragma once
// The target model (DeepSeek-V3 / Kimi K2.x) on the CPU in fp32, over an MLA latent KV cache.
// Matches transformers' DeepseekV3ForCausalLM; where implementations differ we follow
// transformers and say so beside the code.
#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/frontend/model_config.h"
#include "runtime/cpu/mla_attention.h"
#include "runtime/cpu/mla_kv_cache.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/target_weights.h"
#include "runtime/step_model.h"

namespace kplan::cpu {

class CpuTarget final : public TargetModel {
 public:
  // `max_context` <= 0: the config's max_position_embeddings.
  CpuTarget(ModelConfig config, std::shared_ptr<const TargetWeights> weights, int64_t max_context);

  const ModelConfig& config() const override { return config_; }
  StepOutput forward(const StepInput& in) override;
  void commit(std::span<const int32_t> keep) override;
  int64_t cache_length() const override { return cache_.committed(); }
  int64_t max_context() const override { return cache_.capacity(); }
  void reset() override { cache_.reset(); }
  void set_capture_layers(std::vector<int64_t> layer_ids) override;

  // Shared with the DFlash drafter (it has no embedding or lm_head of its own).
  const std::shared_ptr<const TargetWeights>& weights() const { return weights_; }

 private:
  Matrix attention(int64_t layer, const Matrix& x, const StepInput& in);
  Matrix mlp(int64_t layer, const Matrix& x) const;
  void check_step(const StepInput& in) const;

  ModelConfig config_;
  std::shared_ptr<const TargetWeights> weights_;
  MlaDims dims_;
  Rope rope_;
  float softmax_scale_;
  MlaKvCache cache_;
  std::vector<int64_t> capture_layers_;
};

}  // namespace kplan::cpu
