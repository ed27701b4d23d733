#pragma once
// Test helper: a TargetModel (runtime/step_model.h) over a C API session, so tests drive a
// compiled plan through the one door the CLI uses. Errors become kplan::Error carrying the C
// API's message. The model spec comes from the plan (schemas/plan_reader.h), not config.json.
#include <memory>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "runtime/step_model.h"
#include "schemas/plan_reader.h"

namespace kplan {

// Throws kplan::Error with kplan_error_last() unless `s` is OK.
inline void api_check(kplan_status s) {
  if (s != KPLAN_STATUS_OK) throw Error(kplan_error_last());
}

// This machine's GPU arch ("sm_90") by the C API's probe; empty without a GPU (GPU tests skip).
inline std::string gpu_arch() {
  kplan_device_info info;
  return kplan_device_probe(&info) == KPLAN_STATUS_OK ? std::string(info.arch) : std::string();
}

// An open plan and a model on `device` (closed on destruction).
class PlanHandle {
 public:
  explicit PlanHandle(const std::string& path, kplan_device_kind device = KPLAN_DEVICE_AUTO) {
    kplan_plan* p = nullptr;
    api_check(kplan_plan_open(path.c_str(), nullptr, &p));
    plan_.reset(p);
    spec_ = plan::read_plan(path, {.verify_weights = false}).model;
    kplan_model_options o;
    kplan_model_options_init(&o);
    o.device = device;
    kplan_model* m = nullptr;
    api_check(kplan_model_create(p, &o, &m));
    model_.reset(m);
  }
  kplan_plan* get() const { return plan_.get(); }
  kplan_model* model() const { return model_.get(); }
  const ModelConfig& spec() const { return spec_; }

 private:
  struct Close {
    void operator()(kplan_plan* p) const { kplan_plan_close(p); }
  };
  struct Destroy {
    void operator()(kplan_model* m) const { kplan_model_destroy(m); }
  };
  std::unique_ptr<kplan_plan, Close> plan_;
  std::unique_ptr<kplan_model, Destroy> model_;
  ModelConfig spec_;
};

class SessionTargetModel final : public TargetModel {
 public:
  // `plan` must outlive the session.
  explicit SessionTargetModel(const PlanHandle& plan, int64_t max_step_tokens = 0) : config_(plan.spec()) {
    kplan_session_options o;
    kplan_session_options_init(&o);
    o.max_step_tokens = max_step_tokens;
    kplan_session* s = nullptr;
    api_check(kplan_session_create(plan.model(), &o, &s));
    session_.reset(s);
  }
  kplan_session* session() const { return session_.get(); }
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
  int64_t max_step_tokens() const override { return kplan_session_max_step_tokens(session_.get()); }
  void reset() override { api_check(kplan_session_reset(session_.get())); }
  void set_capture_layers(std::vector<int64_t> layer_ids) override {
    api_check(kplan_session_capture_layers_set(session_.get(), layer_ids.data(), static_cast<int32_t>(layer_ids.size())));
    capture_layers_ = std::move(layer_ids);
  }

 private:
  struct Destroy {
    void operator()(kplan_session* s) const { kplan_session_destroy(s); }
  };
  std::unique_ptr<kplan_session, Destroy> session_;
  ModelConfig config_;
  std::vector<int64_t> capture_layers_;
};

}  // namespace kplan
