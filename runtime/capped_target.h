#pragma once
// A TargetModel that takes at most `cap` tokens per step (kplan_session_options.max_step_tokens):
// it lowers max_step_tokens() so the loops chunk their prompts, and refuses larger steps.
#include <algorithm>
#include <memory>
#include <string>

#include "ir/support/error.h"
#include "runtime/step_model.h"

namespace kplan {

class CappedTarget final : public TargetModel {
 public:
  CappedTarget(std::unique_ptr<TargetModel> inner, int64_t cap) : inner_(std::move(inner)), cap_(cap) {}

  const ModelConfig& config() const override { return inner_->config(); }
  StepOutput forward(const StepInput& in) override {
    if (static_cast<int64_t>(in.tokens.size()) > max_step_tokens())
      throw Error("a step of " + std::to_string(in.tokens.size()) + " tokens exceeds the session's largest step (" +
                  std::to_string(max_step_tokens()) + " tokens)");
    return inner_->forward(in);
  }
  void commit(std::span<const int32_t> keep) override { inner_->commit(keep); }
  int64_t cache_length() const override { return inner_->cache_length(); }
  int64_t max_context() const override { return inner_->max_context(); }
  int64_t max_step_tokens() const override {
    const int64_t inner = inner_->max_step_tokens();
    return inner > 0 ? std::min(inner, cap_) : cap_;
  }
  void reset() override { inner_->reset(); }
  void set_capture_layers(std::vector<int64_t> layer_ids) override { inner_->set_capture_layers(std::move(layer_ids)); }
  double device_wait_seconds() const override { return inner_->device_wait_seconds(); }
  std::vector<double> step_costs() override {  // only the steps this session takes
    std::vector<double> costs = inner_->step_costs();
    if (static_cast<int64_t>(costs.size()) > max_step_tokens() + 1) costs.resize(static_cast<size_t>(max_step_tokens()) + 1);
    return costs;
  }

 private:
  std::unique_ptr<TargetModel> inner_;
  int64_t cap_;
};

}  // namespace kplan
