#pragma once
// Matching a plan's cubins to a GPU: "sm_90" names, and the refusal when the plan was not built
// for this GPU's arch.
#include <string>

#include "schemas/plan_model.h"

namespace kplan::plan {

// "sm_90" for compute capability 9.0.
std::string arch_name(int major, int minor);

// The header arch whose cubins run on a GPU of `device_arch`: the same arch, else the newest
// arch of the same major version not newer than the device (cubins are forward compatible
// within a major version). Throws kplan::Error when none fits, e.g. "model.kplan: plan has
// sm_120 kernels only; this GPU is sm_90: recompile with --arch sm_90".
std::string select_arch(const Plan& plan, const std::string& device_arch, const std::string& source);

}  // namespace kplan::plan
