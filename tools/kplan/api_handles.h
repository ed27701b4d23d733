#pragma once
// The C API (kplan/kplan.h) for the CLI's commands: failures as kplan::Error carrying
// kplan_error_last(), and handles that close themselves.
#include <memory>

#include "ir/support/error.h"
#include "kplan/kplan.h"

namespace kplan::cli {

// Throws kplan::Error with kplan_error_last() unless `s` is OK.
inline void api_check(kplan_status s) {
  if (s != KPLAN_STATUS_OK) throw Error(kplan_error_last());
}

struct PlanClose {
  void operator()(kplan_plan* p) const { kplan_plan_close(p); }
};
struct ModelDestroy {
  void operator()(kplan_model* m) const { kplan_model_destroy(m); }
};
struct SessionDestroy {
  void operator()(kplan_session* s) const { kplan_session_destroy(s); }
};
using PlanPtr = std::unique_ptr<kplan_plan, PlanClose>;
using ModelPtr = std::unique_ptr<kplan_model, ModelDestroy>;
using SessionPtr = std::unique_ptr<kplan_session, SessionDestroy>;

// `on_progress` (may be null): the weight bytes hashed (Phase::progress_callback with a Phase).
inline PlanPtr open_plan(const char* path, bool verify_weights, kplan_progress_callback on_progress = nullptr,
                         void* user_data = nullptr) {
  kplan_plan_open_options o{verify_weights ? 1 : 0};
  kplan_plan* p = nullptr;
  api_check(kplan_plan_open_with_progress(path, &o, on_progress, user_data, &p));
  return PlanPtr(p);
}

// `on_progress` (may be null): the weight bytes uploaded to the GPU.
inline ModelPtr create_model(kplan_plan* plan, kplan_device_kind device, kplan_progress_callback on_progress = nullptr,
                             void* user_data = nullptr) {
  kplan_model_options o;
  kplan_model_options_init(&o);
  o.device = device;
  kplan_model* m = nullptr;
  api_check(kplan_model_create_with_progress(plan, &o, on_progress, user_data, &m));
  return ModelPtr(m);
}

inline SessionPtr create_session(kplan_model* model, const kplan_session_options& options) {
  kplan_session* s = nullptr;
  api_check(kplan_session_create(model, &options, &s));
  return SessionPtr(s);
}

}  // namespace kplan::cli
