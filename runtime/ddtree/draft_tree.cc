#include "runtime/ddtree/draft_tree.h"

#include <algorithm>
#include <functional>
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

namespace {

// The best-first pops over per-depth candidates: `log_prob(d, r)` is the r-th best candidate's
// log-probability at depth d (1-based). Popping a node pushes its next sibling (rank + 1 under the
// same parent) and its best child (rank 0 one level deeper); both score no higher than the node,
// so nodes pop in order of falling path log-probability and the first `budget` pops are the best.
// `visit(parent, depth, rank, score)` is told each pop (node index = pops so far) and returns
// whether to go on; `score_of(node)` is a popped node's path log-probability.
template <typename LogProb, typename Visit, typename ScoreOf>
void best_first_pops(int64_t depth, int64_t k, int64_t budget, LogProb log_prob, Visit visit, ScoreOf score_of) {
  if (depth <= 0 || k <= 0 || budget <= 0) return;
  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> heap;
  int64_t order = 0, nodes = 1;
  heap.push({log_prob(1, 0), 0, 1, 0, order++});
  while (!heap.empty() && nodes - 1 < budget) {
    const Candidate n = heap.top();
    heap.pop();
    const int32_t index = static_cast<int32_t>(nodes++);
    if (!visit(n.parent, n.depth, n.rank, n.score)) return;
    if (n.rank + 1 < k) heap.push({score_of(n.parent) + log_prob(n.depth, n.rank + 1), n.parent, n.depth, n.rank + 1, order++});
    if (n.depth < depth) heap.push({n.score + log_prob(n.depth + 1, 0), index, n.depth + 1, 0, order++});
  }
}

}  // namespace

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
  auto at = [&](int32_t d, int32_t rank) { return static_cast<size_t>((d - 1) * c.k + rank); };
  best_first_pops(
      depth, k, shape.budget, [&](int32_t d, int32_t rank) { return static_cast<double>(c.log_probs[at(d, rank)]); },
      [&](int32_t parent, int32_t d, int32_t rank, double score) {
        tree.tokens.push_back(c.ids[at(d, rank)]);
        tree.depths.push_back(d);
        tree.parents.push_back(parent);
        tree.path_log_probs.push_back(score);
        return true;
      },
      [&](int32_t node) { return tree.path_log_probs[static_cast<size_t>(node)]; });
  tree.mask = ancestor_mask(tree.parents);
  return tree;
}

std::vector<double> draft_tree_scores(std::span<const float> log_probs, int64_t width, const TreeShape& shape,
                                      const std::function<bool(double)>& more) {
  if (shape.budget < 0) throw Error("tree: budget must not be negative");
  if (width < 1 || log_probs.size() % static_cast<size_t>(width) != 0)
    throw Error("tree: " + std::to_string(log_probs.size()) + " candidate log-probabilities are not rows of " + std::to_string(width));
  int64_t depth = static_cast<int64_t>(log_probs.size()) / width;
  if (shape.max_depth > 0) depth = std::min(depth, shape.max_depth);
  int64_t k = std::min(shape.budget, width);
  if (shape.top_k > 0) k = std::min(k, shape.top_k);
  std::vector<double> scores(1, 0.0);
  scores.reserve(static_cast<size_t>(shape.budget + 1));
  best_first_pops(
      depth, k, shape.budget,
      [&](int32_t d, int32_t rank) { return static_cast<double>(log_probs[static_cast<size_t>((d - 1) * width + rank)]); },
      [&](int32_t, int32_t, int32_t, double score) {
        scores.push_back(score);
        return !more || more(score);
      },
      [&](int32_t node) { return scores[static_cast<size_t>(node)]; });
  return scores;
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
