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
  for (int64_t b = 1; b <= max_budget_; ++b)
    if (b == max_budget_ || verify_seconds_[static_cast<size_t>(b + 2)] != verify_seconds_[static_cast<size_t>(b + 1)])
      cost_steps_.push_back(b);
}

BudgetChooser BudgetChooser::for_step_costs(std::vector<double> step_costs) {
  if (step_costs.size() < 3)
    throw Error("--budget auto needs the target's step costs (a GPU session measures them); give a budget instead");
  const int64_t largest = static_cast<int64_t>(step_costs.size()) - 1;
  return BudgetChooser(std::move(step_costs), largest - 1);
}

int64_t BudgetChooser::choose(const DraftTree& full) const { return choose(full.path_log_probs); }

int64_t BudgetChooser::choose(std::span<const double> path_log_probs) const {
  BudgetSearch search(*this);
  for (size_t b = 1; b < path_log_probs.size() && search.push(path_log_probs[b]);) ++b;
  return search.best();
}

BudgetSearch::BudgetSearch(const BudgetChooser& chooser) : c_(chooser), scale_(chooser.calibration()) {}

bool BudgetSearch::push(double path_log_prob) {
  if (nodes_ >= c_.max_budget_) return false;
  const double p = std::exp(path_log_prob);
  expected_ += p;
  ++nodes_;
  const double rate = (1.0 + scale_ * expected_) /
                      std::max(c_.draft_seconds_ + c_.verify_seconds_[static_cast<size_t>(nodes_ + 1)], 1e-12);
  if (rate > best_rate_) {
    best_rate_ = rate;
    best_ = nodes_;
  }
  // The best any larger budget b could do: its later nodes each at most p likely.
  while (step_ < c_.cost_steps_.size() && c_.cost_steps_[step_] <= nodes_) ++step_;
  for (size_t i = step_; i < c_.cost_steps_.size(); ++i) {
    const int64_t b = c_.cost_steps_[i];
    const double bound = (1.0 + scale_ * (expected_ + static_cast<double>(b - nodes_) * p)) /
                         std::max(c_.draft_seconds_ + c_.verify_seconds_[static_cast<size_t>(b + 1)], 1e-12);
    if (bound > best_rate_) return true;
  }
  return false;
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
