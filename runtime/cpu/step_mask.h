#pragma once
// Which of a step's new tokens a new token may attend (StepInput::tree_mask semantics).
#include <cstdint>
#include <span>

namespace kplan::cpu {

// Words per row of a packed ancestor mask over `tokens` tokens.
inline int64_t mask_words(int64_t tokens) { return (tokens + 31) / 32; }

// True when step token i may attend step token j: bit j of row i of the packed mask
// [T, ceil(T/32)], or j <= i (causal) when the mask is empty.
inline bool step_mask_allows(std::span<const uint32_t> mask, int64_t tokens, int64_t i, int64_t j) {
  if (mask.empty()) return j <= i;
  const uint32_t word = mask[static_cast<size_t>(i * mask_words(tokens) + j / 32)];
  return ((word >> (j % 32)) & 1u) != 0;
}

}  // namespace kplan::cpu
