#pragma once
// Runs the prompt through the target as one causal step after the committed cache and commits
// all of it. Returns the step's output (logits of every prompt token, captured layer outputs).
#include <cstdint>
#include <span>

#include "runtime/step_model.h"

namespace kplan {

StepOutput prefill(TargetModel& target, std::span<const int32_t> prompt);

}  // namespace kplan
