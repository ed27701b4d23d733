#pragma once
// The target model (DeepSeek-V3 / Kimi K2.x) on the CPU: the compiled IR's @target run by the
// interpreter for every step, and @target_commit for every commit. The KV state is what the IR
// says it is: per layer, committed rows [S, kv_lora + rope] (normed latent | roped k) and the
// last step's pending rows [T, kv_lora + rope].
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "compiler/driver/compile.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/step_model.h"

namespace kplan::cpu {

class CpuTarget final : public TargetModel {
 public:
  // Compiles the checkpoint (every tensor validated, the pass pipeline run, so attention runs
  // in the absorbed form). `max_context` <= 0: the config's max_position_embeddings.
  CpuTarget(const std::filesystem::path& checkpoint_dir, int64_t max_context);

  const ModelConfig& config() const override { return compiled_.target->config(); }
  StepOutput forward(const StepInput& in) override;
  void commit(std::span<const int32_t> keep) override;
  int64_t cache_length() const override { return committed_; }
  int64_t max_context() const override { return max_context_; }
  void reset() override;
  void set_capture_layers(std::vector<int64_t> layer_ids) override;

  const std::filesystem::path& checkpoint_dir() const { return checkpoint_dir_; }
  // The compiled module (after the pass pipeline): @target and @target_commit.
  const ir::Module& module() const { return *compiled_.module; }

 private:
  std::filesystem::path checkpoint_dir_;
  CompileResult compiled_;
  std::unique_ptr<Interpreter> step_, commit_;
  int64_t max_context_;
  int64_t committed_ = 0;
  int64_t pending_ = 0;
  std::vector<TensorPtr> kv_, kv_step_;  // per layer
  std::vector<int64_t> capture_layers_;
};

}  // namespace kplan::cpu
