#pragma once
// DDTree's `--budget auto`: each round's tree size from a cost model and the acceptance seen so
// far in the session. The round's tree is built best-first at the largest budget the target's
// steps allow; since the heap pops nodes in falling path probability, the tree of any smaller
// budget b is its first b nodes (truncate_tree). The drafter's path probabilities predict how
// many of those nodes a round accepts (the sum of exp(path log-prob) over them), scaled by how
// the session's rounds have accepted against that prediction; the verify step's cost comes
// from the target (its step times, measured on the device) and the drafter's from the rounds.
// The budget maximising (1 + predicted accepted) / (draft + verify time) wins.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/ddtree/draft_tree.h"

namespace kplan {

class BudgetChooser {
 public:
  // `verify_seconds[t]`: a verify step of t tokens (index 0 unused), t up to max_budget + 1.
  BudgetChooser(std::vector<double> verify_seconds, int64_t max_budget);
  // From a target's step costs (TargetModel::step_costs: [t] for t = 0 .. its largest step), up to
  // the largest budget they can verify. Throws kplan::Error when the target has none.
  static BudgetChooser for_step_costs(std::vector<double> step_costs);

  int64_t max_budget() const { return max_budget_; }
  // The budget for a round whose best-first tree at max_budget is `full`.
  int64_t choose(const DraftTree& full) const;
  // The same from the tree's path log-probabilities alone ([0] the root's), as a device round
  // hands them back.
  int64_t choose(std::span<const double> path_log_probs) const;
  // After the round: the tree it verified, how many nodes besides the root it accepted, and
  // what drafting it cost.
  void observe(const DraftTree& used, int64_t accepted_nodes, double draft_seconds);
  void observe(std::span<const double> used_path_log_probs, int64_t accepted_nodes, double draft_seconds);
  double calibration() const { return (accepted_ + kPrior) / (predicted_ + kPrior); }

 private:
  friend class BudgetSearch;
  static constexpr double kPrior = 2.0;  // nodes of prior belief that the prediction is right
  std::vector<double> verify_seconds_;
  int64_t max_budget_;
  double accepted_ = 0, predicted_ = 0;
  double draft_seconds_ = 0;  // mean over the rounds so far
  int64_t rounds_ = 0;
  // The budgets ending a run of equal verify costs (each bucket's last budget), ascending: the
  // only ones a bound on a larger budget needs to look at.
  std::vector<int64_t> cost_steps_;
};

// choose() one node at a time, as a best-first build pops them (falling path log-probability):
// push() takes each node's path log-probability and returns false as soon as no larger budget
// can beat the best so far, because every later node is at most as likely as the last one
// pushed (a bound on the expected accepted nodes of each larger budget), so a builder can stop
// there and best() is what choose() over the whole tree returns.
class BudgetSearch {
 public:
  explicit BudgetSearch(const BudgetChooser& chooser);
  bool push(double path_log_prob);
  int64_t best() const { return best_; }

 private:
  const BudgetChooser& c_;
  double scale_;
  int64_t nodes_ = 0;
  double expected_ = 0, best_rate_ = -1;
  int64_t best_ = 1;
  size_t step_ = 0;  // the first of the chooser's cost steps past nodes_
};

// The first 1 + budget nodes of a best-first tree (root included): the tree of that budget.
DraftTree truncate_tree(const DraftTree& tree, int64_t budget);

}  // namespace kplan
