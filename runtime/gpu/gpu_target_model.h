#pragma once
// The target model over a plan on the GPU: a TargetModel (runtime/step_model.h) the AR, DFlash
// and DDTree loops drive, with the KV cache state (committed length, pending step) on the host
// and the caches themselves in its session's arena. Several of them may share one GpuModel
// (modules and weights on the device once).
#include <memory>
#include <string>

#include "runtime/gpu/gpu_executor.h"
#include "runtime/gpu/gpu_model.h"
#include "runtime/step_model.h"

namespace kplan::gpu {

class GpuTargetModel : public TargetModel {
 public:
  // A session on `model`.
  GpuTargetModel(std::shared_ptr<const GpuModel> model, GpuExecutor::Options options = {});
  // A session on a model of its own (loads the plan onto the GPU).
  GpuTargetModel(std::shared_ptr<const plan::Plan> plan, std::string source, GpuExecutor::Options options = {});

  const ModelConfig& config() const override { return executor_.plan().model; }
  StepOutput forward(const StepInput& in) override;
  void commit(std::span<const int32_t> keep) override;
  int64_t cache_length() const override { return cache_length_; }
  int64_t max_context() const override { return max_context_; }
  int64_t max_step_tokens() const override { return max_step_tokens_; }
  void reset() override;
  void set_capture_layers(std::vector<int64_t> layer_ids) override;
  double device_wait_seconds() const override { return executor_.wait_seconds(); }
  // Each target bucket's graph replay timed once (median of 9 after 2 warm-ups) and kept; a
  // step of t tokens costs its bucket's time.
  std::vector<double> step_costs() override;

  GpuExecutor& executor() { return executor_; }
  // A device round (runtime/gpu/gpu_device_rounds.h) verified and committed `kept` tokens on
  // the device: the host's account of the cache follows.
  void committed_on_device(int64_t kept);
  // Programs that run with every step and commit from now on, in the same graphs and on the
  // same inputs (the plan's drafter: "draft_context" after each step of T tokens, at its bucket
  // of the step's size, and "draft_commit" after each commit); "" for none. Throws when the plan
  // lacks a bucket of `step` for one of the target's step sizes.
  void set_followers(const std::string& step, const std::string& commit);
  // Captures those chains' graphs now (a session's load), so no timed step captures one.
  void prepare_followers(const std::string& step, const std::string& commit);
  // Inputs of a step of `tokens` tokens at the current cache length (for benchmarks).
  StepInputs step_inputs_for(const StepInput& in, const plan::Bucket& bucket) const;

 private:
  GpuExecutor executor_;
  std::string source_;
  int64_t max_context_ = 0;
  int64_t max_step_tokens_ = 0;
  int64_t cache_length_ = 0;
  int64_t pending_ = 0;  // tokens of the last forward, not yet committed
  std::vector<int64_t> capture_layers_;
  std::vector<double> step_costs_;
  std::string step_follower_;
  const plan::Bucket* commit_follower_ = nullptr;
};

}  // namespace kplan::gpu
