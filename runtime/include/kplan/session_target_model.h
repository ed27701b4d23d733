#pragma once
// A TargetModel (runtime/step_model.h) over a C API session, so the C++ decode loops (AR, DFlash,
// DDTree) run a compiled plan through the one door the CLI uses. Errors become kplan::Error
// carrying the C API's message.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "runtime/step_model.h"

namespace kplan {

// Throws kplan::Error with kplan_error_last() unless `s` is OK.
inline void api_check(kplan_status s) {
  if (s != KPLAN_STATUS_OK) throw Error(kplan_error_last());
}

// Owns an open plan (closed on destruction).
class PlanHandle {
 public:
  explicit PlanHandle(const std::string& path, bool verify_weights = true) {
    kplan_plan_open_options o{verify_weights ? 1 : 0};
    kplan_plan* p = nullptr;
    api_check(kplan_plan_open(path.c_str(), &o, &p));
    plan_.reset(p);
  }
  kplan_plan* get() const { return plan_.get(); }

 private:
  struct Close {
    void operator()(kplan_plan* p) const { kplan_plan_close(p); }
  };
  std::unique_ptr<kplan_plan, Close> plan_;
};

class SessionTargetModel final : public TargetModel {
 public:
  // Opens the plan at `path` and keeps it open as long as the model lives.
  static std::unique_ptr<SessionTargetModel> open(const std::string& path, kplan_session_options options) {
    auto plan = std::make_shared<PlanHandle>(path);
    auto model = std::make_unique<SessionTargetModel>(*plan, options);
    model->owned_plan_ = std::move(plan);
    return model;
  }
  // `plan` must outlive the model.
  SessionTargetModel(const PlanHandle& plan, kplan_session_options options) {
    kplan_session* s = nullptr;
    api_check(kplan_session_create(plan.get(), &options, &s));
    plan_ = plan.get();
    session_.reset(s);
    config_ = parse_model_config(nlohmann::json::parse(kplan_plan_config_json(plan.get())), "plan model config");
  }
  kplan_session* session() const { return session_.get(); }
  kplan_plan* plan() const { return plan_; }
  bool on_gpu() const { return kplan_session_device(session_.get()) == KPLAN_DEVICE_GPU; }

  const ModelConfig& config() const override { return config_; }
  StepOutput forward(const StepInput& in) override {
    const int32_t n = static_cast<int32_t>(in.tokens.size());
    StepOutput out;
    out.logits = Matrix(n, config_.vocab_size);
    api_check(kplan_session_step(session_.get(), in.tokens.data(), in.positions.data(), n,
                                 in.tree_mask.empty() ? nullptr : in.tree_mask.data(), out.logits.data.data()));
    for (size_t i = 0; i < capture_layers_.size(); ++i) {
      Matrix m(n, config_.hidden_size);
      api_check(kplan_session_captured(session_.get(), static_cast<int32_t>(i), m.data.data(),
                                       static_cast<int64_t>(m.data.size())));
      out.captured.push_back(std::move(m));
    }
    return out;
  }
  void commit(std::span<const int32_t> keep) override {
    api_check(kplan_session_commit(session_.get(), keep.data(), static_cast<int32_t>(keep.size())));
  }
  int64_t cache_length() const override { return kplan_session_cache_length(session_.get()); }
  int64_t max_context() const override { return kplan_session_max_context(session_.get()); }
  void reset() override { api_check(kplan_session_reset(session_.get())); }
  void set_capture_layers(std::vector<int64_t> layer_ids) override {
    api_check(kplan_session_capture_layers_set(session_.get(), layer_ids.data(), static_cast<int32_t>(layer_ids.size())));
    capture_layers_ = std::move(layer_ids);
  }

 private:
  struct Destroy {
    void operator()(kplan_session* s) const { kplan_session_destroy(s); }
  };
  std::shared_ptr<PlanHandle> owned_plan_;  // destroyed after session_ (declared first)
  std::unique_ptr<kplan_session, Destroy> session_;
  kplan_plan* plan_ = nullptr;
  ModelConfig config_;
  std::vector<int64_t> capture_layers_;
};

}  // namespace kplan
