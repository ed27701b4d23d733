#pragma once
// What `kplan compile --synthetic-weights SEED` records for each weight of the plan instead of
// its bytes (plan_model.h SyntheticInit; the values are ir/support/synthetic_values.h's): the
// distribution `kplan synth` draws the same tensor from (weight_init.h init_rule: std
// 1/sqrt(fan_in) for projections, norms around 1, a small router bias, ...), and for
// compressed-tensors INT4 parts the quantisation of a virtual float weight of that
// distribution, the packed words and the scales of one module sharing one stream.
#include <cstdint>

#include "schemas/plan_model.h"

namespace kplan {

// The synthetic entry of `w` (its kernel index left 0 for the caller to set). A weight named
// "<module>.weight_packed" (int32) or "<module>.weight_scale" (bf16) is an INT4 part of
// `group_size`; any other f32 / bf16 weight is drawn as itself. The stream is the FNV-1a hash of
// "<source>:<name>" (of the module for INT4 parts). Throws kplan::Error naming a weight whose
// dtype cannot be synthesised.
plan::SyntheticInit synthetic_init(const plan::Weight& w, uint64_t seed, int64_t group_size);

}  // namespace kplan
