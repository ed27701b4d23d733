#include "ir/support/tree_mask.h"

#include <string>

#include "ir/support/error.h"

namespace kplan {

std::vector<uint32_t> ancestor_mask(std::span<const int32_t> parents) {
  const int64_t n = static_cast<int64_t>(parents.size());
  const int64_t words = mask_words(n);
  std::vector<uint32_t> mask(static_cast<size_t>(n * words), 0u);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t parent = parents[i];
    if (parent >= i || parent < -1)
      throw Error("tree: node " + std::to_string(i) + " has parent " + std::to_string(parent) +
                  " (a parent must precede its child)");
    // A node sees what its parent sees, plus itself.
    if (parent >= 0)
      for (int64_t w = 0; w < words; ++w) mask[i * words + w] = mask[parent * words + w];
    mask[i * words + i / 32] |= 1u << (i % 32);
  }
  return mask;
}

std::vector<uint32_t> causal_mask(int64_t nodes) {
  const int64_t words = mask_words(nodes);
  std::vector<uint32_t> mask(static_cast<size_t>(nodes * words), 0u);
  for (int64_t i = 0; i < nodes; ++i)
    for (int64_t j = 0; j <= i; ++j) mask[i * words + j / 32] |= 1u << (j % 32);
  return mask;
}

}  // namespace kplan
