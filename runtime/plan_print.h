#pragma once
// Readable text views of a plan, for `kplan inspect` (one function per section).
#include <string>

#include "schemas/plan_model.h"

namespace kplan::plan {

enum class PlanSection { Summary, Ir, Kernels, Memory, Launches, Weights };

std::string describe_plan(const Plan& plan, PlanSection section);

// "1.50 MiB", "512 B": sizes for humans.
std::string format_bytes(uint64_t bytes);

}  // namespace kplan::plan
