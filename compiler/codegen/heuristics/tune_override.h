#pragma once
// KPLAN_TUNE: compile-time tuning overrides for measuring variants of a whole plan side by side
// (tools/device/slice_variants.sh), without an environment switch per knob.
//   KPLAN_TUNE="matmul[W_LAYOUT=1]:UNROLL=16;moe_grouped_gate_up[W_FMT=1]:PF=2,ROWS=8"
// Entries are separated by ';': a family name, optional conditions in [] (parameters the
// instance already holds, all of which must be equal), then ':' and the tuning parameters to set.
// A matching entry's values replace the caller's and the heuristics' choices; the family's own
// check still judges the result.
#include <string>
#include <vector>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen {

struct TuneOverride {
  std::string family;
  ParamValues when;  // every one must match
  ParamValues set;
};

// Parses a KPLAN_TUNE value; throws kplan::Error naming the entry and what is wrong with it.
std::vector<TuneOverride> parse_tune_overrides(std::string_view text);

// Applies every entry of `overrides` for `family` whose conditions `params` meets; throws
// kplan::Error when an entry sets a parameter that is not one of the family's tuning parameters.
void apply_tune_overrides(const std::vector<TuneOverride>& overrides, const Family& family, ParamValues& params);

// The entries of the KPLAN_TUNE environment variable (none when it is unset), parsed once.
const std::vector<TuneOverride>& env_tune_overrides();

}  // namespace kplan::codegen
