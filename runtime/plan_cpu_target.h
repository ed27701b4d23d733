#pragma once
// The CPU reference over a plan (no GPU here): the plan carries the checkpoint's own tensors and
// config.json, so the reference model is built from them exactly as from the checkpoint.
#include <cstdint>
#include <memory>
#include <string>

#include "schemas/plan_model.h"
#include "runtime/step_model.h"

namespace kplan {

// Throws kplan::Error when the plan lacks a tensor the reference needs (e.g. a repacked one).
std::unique_ptr<TargetModel> make_plan_cpu_target(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                                  int64_t max_context);

}  // namespace kplan
