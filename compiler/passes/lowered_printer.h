#pragma once
// The text form of a lowering in progress (kplan compile --dump-ir-after=<lowering stage>): the
// programs' IR with what the stages so far recorded as trailing attributes on each op
// (kernels, weight entries, slots, in-place aliases), then the buckets, then each bucket's
// launches with named arguments. Stable and deterministic: FileCheck goldens read it.
#include <string>
#include <string_view>

#include "compiler/passes/lower_state.h"

namespace kplan::passes {

std::string print_lowered(const LowerState& s, std::string_view after_stage);

}  // namespace kplan::passes
