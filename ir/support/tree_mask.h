#pragma once
// Trees as data: a parent array (parent index < child index, -1 for the root) becomes an
// ancestor bitmask packed in 32-bit words, [nodes, mask_words(nodes)]: bit j of row i is set when
// node j is node i or one of its ancestors — exactly the new tokens node i may attend in a
// verify step (StepInput::tree_mask).
#include <cstdint>
#include <span>
#include <vector>

namespace kplan {

inline int64_t mask_words(int64_t nodes) { return (nodes + 31) / 32; }

// Throws kplan::Error when a parent does not precede its child.
std::vector<uint32_t> ancestor_mask(std::span<const int32_t> parents);

// The causal mask of a chain of `nodes` step tokens (token i attends tokens 0..i): what a step
// without a tree means, in the same packed layout.
std::vector<uint32_t> causal_mask(int64_t nodes);

// Bit j of row i of a packed mask whose rows hold `words` words (mask_words(nodes) for a
// whole step; a kernel reading a bucket's mask uses the bucket's width).
inline bool mask_bit_words(const uint32_t* mask, int64_t words, int64_t i, int64_t j) {
  return (mask[static_cast<size_t>(i * words + j / 32)] >> (j % 32)) & 1u;
}
inline bool mask_bit(std::span<const uint32_t> mask, int64_t nodes, int64_t i, int64_t j) {
  return mask_bit_words(mask.data(), mask_words(nodes), i, j);
}

}  // namespace kplan
