#include "runtime/ddtree/budget_chooser.h"

#include <algorithm>
#include <cmath>

#include "ir/support/error.h"
#include "ir/support/tree_mask.h"

namespace kplan {

BudgetChooser::BudgetChooser(std::vector<double> verify_seconds, int64_t max_budget)
    : verify_seconds_(std::move(verify_seconds)), max_budget_(max_budget) {
  if (max_budget_ < 1) throw Error("--budget auto: the target verifies no tree (largest step of one token)");
  if (static_cast<int64_t>(verify_seconds_.size()) < max_budget_ + 2)
    throw Error("--budget auto: the cost model covers " + std::to_string(verify_seconds_.size()) + " step sizes, " +
                std::to_string(max_budget_ + 2) + " needed");
}

BudgetChooser BudgetChooser::for_step_costs(std::vector<double> step_costs) {
  if (step_costs.size() < 3)
    throw Error("--budget auto needs the target's step costs (a GPU session measures them); give a budget instead");
  const int64_t largest = static_cast<int64_t>(step_costs.size()) - 1;
  return BudgetChooser(std::move(step_costs), largest - 1);
}

int64_t BudgetChooser::choose(const DraftTree& full) const { return choose(full.path_log_probs); }

int64_t BudgetChooser::choose(std::span<const double> path_log_probs) const {
  const double scale = calibration();
  const int64_t nodes = std::min<int64_t>(static_cast<int64_t>(path_log_probs.size()) - 1, max_budget_);
  double expected = 0, best_rate = -1;
  int64_t best = std::max<int64_t>(1, std::min<int64_t>(nodes, 1));
  for (int64_t b = 1; b <= nodes; ++b) {
    expected += std::exp(path_log_probs[static_cast<size_t>(b)]);
    const double seconds = draft_seconds_ + verify_seconds_[static_cast<size_t>(b + 1)];
    const double rate = (1.0 + scale * expected) / std::max(seconds, 1e-12);
    if (rate > best_rate) {
      best_rate = rate;
      best = b;
    }
  }
  return best;
}

void BudgetChooser::observe(const DraftTree& used, int64_t accepted_nodes, double draft_seconds) {
  observe(used.path_log_probs, accepted_nodes, draft_seconds);
}

void BudgetChooser::observe(std::span<const double> used, int64_t accepted_nodes, double draft_seconds) {
  for (size_t i = 1; i < used.size(); ++i) predicted_ += std::exp(used[i]);
  accepted_ += static_cast<double>(accepted_nodes);
  ++rounds_;
  draft_seconds_ += (draft_seconds - draft_seconds_) / static_cast<double>(rounds_);
}

DraftTree truncate_tree(const DraftTree& tree, int64_t budget) {
  const size_t n = static_cast<size_t>(std::min<int64_t>(tree.size(), budget + 1));
  DraftTree t;
  t.tokens.assign(tree.tokens.begin(), tree.tokens.begin() + n);
  t.depths.assign(tree.depths.begin(), tree.depths.begin() + n);
  t.parents.assign(tree.parents.begin(), tree.parents.begin() + n);
  t.path_log_probs.assign(tree.path_log_probs.begin(), tree.path_log_probs.begin() + n);
  t.mask = ancestor_mask(t.parents);
  return t;
}

}  // namespace kplan
