#include "runtime/ddtree/draft_tree.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "ir/support/error.h"
#include "runtime/ddtree/log_softmax.h"
#include "ir/support/tree_mask.h"

namespace kplan {
namespace {

// Per depth, the k most likely token ids, best first (ties: lower id first).
std::vector<std::vector<int32_t>> top_k_per_depth(const Matrix& log_probs, int64_t depth,
                                                  int64_t k) {
  std::vector<std::vector<int32_t>> top(static_cast<size_t>(depth));
  std::vector<int32_t> ids(static_cast<size_t>(log_probs.cols));
  for (int64_t d = 0; d < depth; ++d) {
    const float* row = log_probs.row(d);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [row](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    top[d].assign(ids.begin(), ids.begin() + k);
  }
  return top;
}

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
  int64_t depth = log_probs.rows;
  if (shape.max_depth > 0) depth = std::min(depth, shape.max_depth);
  const int64_t vocab = log_probs.cols;
  int64_t k = std::min(shape.budget, vocab);
  if (shape.top_k > 0) k = std::min(k, shape.top_k);

  DraftTree tree;
  tree.tokens.push_back(root_token);
  tree.depths.push_back(0);
  tree.parents.push_back(-1);
  tree.path_log_probs.push_back(0.0);

  if (depth > 0 && k > 0) {
    Matrix normalised = log_probs;
    log_softmax_rows(normalised);
    const auto top = top_k_per_depth(normalised, depth, k);
    auto log_prob = [&](int32_t d, int32_t rank) {
      return static_cast<double>(normalised.row(d - 1)[top[d - 1][rank]]);
    };

    // Best-first: popping a node pushes its next sibling (rank + 1 under the same parent) and
    // its best child (rank 0 one level deeper); both score no higher than the node, so nodes
    // pop in order of falling path log-probability and the first `budget` pops are the best.
    std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> heap;
    int64_t order = 0;
    heap.push({log_prob(1, 0), 0, 1, 0, order++});
    while (!heap.empty() && tree.size() - 1 < shape.budget) {
      const Candidate c = heap.top();
      heap.pop();
      const int32_t index = static_cast<int32_t>(tree.size());
      tree.tokens.push_back(top[c.depth - 1][c.rank]);
      tree.depths.push_back(c.depth);
      tree.parents.push_back(c.parent);
      tree.path_log_probs.push_back(c.score);
      if (c.rank + 1 < k)
        heap.push({tree.path_log_probs[c.parent] + log_prob(c.depth, c.rank + 1), c.parent, c.depth,
                   c.rank + 1, order++});
      if (c.depth < depth)
        heap.push({c.score + log_prob(c.depth + 1, 0), index, c.depth + 1, 0, order++});
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
