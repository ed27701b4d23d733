#include "runtime/ddtree/tree_walk.h"

#include <functional>

namespace kplan {
namespace {

// `pick(node)`: the target's choice at a tree node.
WalkResult walk(const DraftTree& tree, const std::function<int32_t(int32_t)>& pick_at) {
  const int64_t n = tree.size();
  // Children of each node as a CSR list (parents precede children, so one pass fills it).
  std::vector<int32_t> child_start(static_cast<size_t>(n + 1), 0), children(static_cast<size_t>(n));
  for (int64_t i = 1; i < n; ++i) ++child_start[tree.parents[i] + 1];
  for (int64_t i = 0; i < n; ++i) child_start[i + 1] += child_start[i];
  std::vector<int32_t> fill(child_start.begin(), child_start.end() - 1);
  for (int32_t i = 1; i < n; ++i) children[fill[tree.parents[i]]++] = i;

  WalkResult result;
  int32_t node = 0;
  result.accepted.push_back(node);
  for (;;) {
    // One pick per visited node, drawn only when the walk reaches it.
    const int32_t pick = pick_at(node);
    int32_t next = -1;
    for (int32_t c = child_start[node]; c < child_start[node + 1]; ++c)
      if (tree.tokens[children[c]] == pick) next = children[c];
    if (next < 0) {
      result.next_token = pick;
      return result;
    }
    node = next;
    result.accepted.push_back(node);
  }
}

}  // namespace

WalkResult walk_tree(const DraftTree& tree, const Matrix& logits, TokenSampler& sampler) {
  return walk(tree, [&](int32_t node) { return sampler.pick(logits.row(node), logits.cols); });
}

WalkResult walk_tree(const DraftTree& tree, const StepOutput& verified, TokenSampler& sampler) {
  return walk(tree, [&](int32_t node) { return sampler.pick(verified, node); });
}

}  // namespace kplan
