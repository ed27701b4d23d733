#pragma once
// Which of a step's new tokens a new token may attend (StepInput::tree_mask semantics): the
// packed ancestor mask of ir/support/tree_mask.h, or causal when a step has none.
#include <cstdint>
#include <span>

#include "ir/support/tree_mask.h"

namespace kplan::cpu {

inline bool step_mask_allows(std::span<const uint32_t> mask, int64_t tokens, int64_t i, int64_t j) {
  return mask.empty() ? j <= i : mask_bit(mask, tokens, i, j);
}

}  // namespace kplan::cpu
