#include "runtime/ddtree/draft_tree.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "ir/support/error.h"
#include "runtime/ddtree/log_softmax.h"
#include "ir/support/tree_mask.h"

namespace kplan {
namespace {

// A node not yet in the tree: the `rank`-th best token at `depth` under tree node `parent`.
struct Candidate {
  double score;  // path log-probability
  int32_t parent;
  int32_t depth;
  int32_t rank;
  int64_t order;  // push order: equal scores pop first-pushed first, so the result is stable
};

struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.order > b.order);
  }
};

}  // namespace

DraftTree build_draft_tree(int32_t root_token, const Matrix& log_probs, const TreeShape& shape) {
  if (shape.budget < 0) throw Error("tree: budget must not be negative");
  int64_t k = std::min(shape.budget, log_probs.cols);
  if (shape.top_k > 0) k = std::min(k, shape.top_k);
  return build_draft_tree(root_token, top_candidates(log_probs, shape.max_depth, k), shape);
}

DraftTree build_draft_tree(int32_t root_token, const DepthCandidates& c, const TreeShape& shape) {
  if (shape.budget < 0) throw Error("tree: budget must not be negative");
  if (c.ids.size() != static_cast<size_t>(c.depth * c.k) || c.log_probs.size() != c.ids.size())
    throw Error("tree: candidates hold " + std::to_string(c.ids.size()) + " ids for " + std::to_string(c.depth) +
                " depths of " + std::to_string(c.k));
  int64_t depth = c.depth;
  if (shape.max_depth > 0) depth = std::min(depth, shape.max_depth);
  int64_t k = std::min(shape.budget, c.k);
  if (shape.top_k > 0) k = std::min(k, shape.top_k);

  DraftTree tree;
  tree.tokens.push_back(root_token);
  tree.depths.push_back(0);
  tree.parents.push_back(-1);
  tree.path_log_probs.push_back(0.0);

  if (depth > 0 && k > 0) {
    auto at = [&](int32_t d, int32_t rank) { return static_cast<size_t>((d - 1) * c.k + rank); };
    auto log_prob = [&](int32_t d, int32_t rank) { return static_cast<double>(c.log_probs[at(d, rank)]); };

    // Best-first: popping a node pushes its next sibling (rank + 1 under the same parent) and
    // its best child (rank 0 one level deeper); both score no higher than the node, so nodes
    // pop in order of falling path log-probability and the first `budget` pops are the best.
    std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> heap;
    int64_t order = 0;
    heap.push({log_prob(1, 0), 0, 1, 0, order++});
    while (!heap.empty() && tree.size() - 1 < shape.budget) {
      const Candidate n = heap.top();
      heap.pop();
      const int32_t index = static_cast<int32_t>(tree.size());
      tree.tokens.push_back(c.ids[at(n.depth, n.rank)]);
      tree.depths.push_back(n.depth);
      tree.parents.push_back(n.parent);
      tree.path_log_probs.push_back(n.score);
      if (n.rank + 1 < k)
        heap.push({tree.path_log_probs[n.parent] + log_prob(n.depth, n.rank + 1), n.parent, n.depth,
                   n.rank + 1, order++});
      if (n.depth < depth)
        heap.push({n.score + log_prob(n.depth + 1, 0), index, n.depth + 1, 0, order++});
    }
  }
  tree.mask = ancestor_mask(tree.parents);
  return tree;
}

StepInput tree_step_input(const DraftTree& tree, int32_t root_position) {
  StepInput in;
  in.tokens = tree.tokens;
  in.positions.resize(tree.depths.size());
  for (size_t i = 0; i < tree.depths.size(); ++i) in.positions[i] = root_position + tree.depths[i];
  in.tree_mask = tree.mask;
  return in;
}

}  // namespace kplan
