#pragma once
// The DDTree draft tree: from the drafter's per-depth log-probabilities, a best-first heap picks
// the `budget` most likely nodes, where a node's score is its path log-probability (the sum of
// the draft log-probs of the tokens from depth 1 down to it). Scores only fall along a path, so
// the picked set is closed under taking parents: every node's parent is in the tree.
//
// Layout (the verify step's layout): index 0 is the root, the bonus token (depth 0, parent -1);
// nodes 1..budget follow in the order the heap picked them, so a parent precedes its children.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/step_model.h"

namespace kplan {

struct TreeShape {
  int64_t budget = 0;     // nodes besides the root
  int64_t top_k = 0;      // candidates per depth; 0: min(budget, vocab). 1 gives a single path.
  int64_t max_depth = 0;  // deepest depth used; 0: all rows of the log-probs
};

struct DraftTree {
  std::vector<int32_t> tokens;         // [T]
  std::vector<int32_t> depths;         // [T], root 0
  std::vector<int32_t> parents;        // [T], root -1
  std::vector<double> path_log_probs;  // [T], root 0
  std::vector<uint32_t> mask;          // ancestor mask [T, mask_words(T)]
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

// `log_probs` [depth, vocab]: row d-1 is the draft distribution at depth d (rows are
// log-softmax-normalised here). The tree has 1 + min(budget, nodes available) entries.
DraftTree build_draft_tree(int32_t root_token, const Matrix& log_probs, const TreeShape& shape);
// The same tree from each depth's best candidates (what a device hands over): with at least
// min(budget, vocab) candidates per depth it equals the tree from the full distribution, since
// a node of rank r under its parent needs the r better siblings in the tree first.
DraftTree build_draft_tree(int32_t root_token, const DepthCandidates& candidates, const TreeShape& shape);

// The path log-probabilities alone of that tree (root's 0.0 first), from each depth's candidate
// log-probabilities [rows, width] (best first): what --budget auto chooses on when the device
// builds the tree itself (no tokens, parents or mask; the same pops as build_draft_tree). `more`,
// when given, is told each pop's score and stops the build by returning false (BudgetSearch).
std::vector<double> draft_tree_scores(std::span<const float> log_probs, int64_t width, const TreeShape& shape,
                                      const std::function<bool(double)>& more = nullptr);

// The verify step for a tree whose root sits at `root_position`: position = root + depth.
StepInput tree_step_input(const DraftTree& tree, int32_t root_position);

}  // namespace kplan
