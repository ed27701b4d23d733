#pragma once
// The DFlash drafter kplan_session_generate runs for a plan that carries one. The seam for the
// CPU drafter over the plan's own IR (runtime/plan_cpu_target.h: make_plan_cpu_drafter, the
// cpuplan work): until it is in the build, a clear error says so; then this is one call.
#include <memory>
#include <string>

#include "runtime/step_model.h"
#include "schemas/plan_model.h"

namespace kplan {

// Throws kplan::Error when the plan has no drafter or it cannot run here.
std::unique_ptr<Drafter> make_session_drafter(std::shared_ptr<const plan::Plan> plan, const std::string& source);

}  // namespace kplan
