// --budget auto: the tree of a smaller budget is a prefix of the largest one (so a round builds
// once and truncates), from dense log-probs and from per-depth candidates alike; the chooser
// takes the budget that maximises predicted tokens per second under the step costs, scales its
// prediction by the acceptance it observes, and folds the drafter's cost into each round's.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "ir/support/tree_mask.h"
#include "runtime/ddtree/budget_chooser.h"
#include "runtime/ddtree/draft_tree.h"
#include "runtime/ddtree/log_softmax.h"
#include "runtime/ddtree/random_stream.h"

namespace kplan {
namespace {

Matrix random_log_probs(int64_t depth, int64_t vocab, uint64_t seed, double sharpness) {
  RandomStream random(seed);
  Matrix m(depth, vocab);
  for (float& v : m.data) v = static_cast<float>(sharpness * random.uniform());
  log_softmax_rows(m);
  return m;
}

// A drafter sure of one token per depth (probability ~0.9), unsure of the rest.
Matrix confident_log_probs(int64_t depth, int64_t vocab, uint64_t seed) {
  Matrix m = random_log_probs(depth, vocab, seed, 1.0);
  for (int64_t d = 0; d < depth; ++d) m.row(d)[(d * 7) % vocab] += 8.0f;
  log_softmax_rows(m);
  return m;
}

TEST(BudgetChooser, ASmallerBudgetsTreeIsThePrefixOfTheLargest) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Matrix lp = random_log_probs(7, 40, seed, 6.0);
    TreeShape big{.budget = 40, .top_k = 0, .max_depth = 0};
    const DraftTree full = build_draft_tree(5, lp, big);
    const DepthCandidates candidates = top_candidates(lp, 0, 40);
    EXPECT_EQ(build_draft_tree(5, candidates, big).tokens, full.tokens);
    for (int64_t b = 1; b <= 40; ++b) {
      TreeShape shape{.budget = b, .top_k = 0, .max_depth = 0};
      const DraftTree want = build_draft_tree(5, lp, shape);
      const DraftTree got = truncate_tree(full, b);
      EXPECT_EQ(got.tokens, want.tokens) << "budget " << b;
      EXPECT_EQ(got.parents, want.parents) << "budget " << b;
      EXPECT_EQ(got.depths, want.depths) << "budget " << b;
      EXPECT_EQ(got.mask, want.mask) << "budget " << b;
    }
  }
}

// Costs of a step of t tokens, t = 0 .. 64: a fixed launch cost plus `per_token` each.
std::vector<double> linear_costs(double fixed, double per_token, int64_t largest = 64) {
  std::vector<double> c(static_cast<size_t>(largest + 1), 0.0);
  for (int64_t t = 1; t <= largest; ++t) c[static_cast<size_t>(t)] = fixed + per_token * static_cast<double>(t);
  return c;
}

TEST(BudgetChooser, TakesTheBudgetThatPaysUnderTheCostModel) {
  const Matrix lp = confident_log_probs(15, 200, 9);
  const DraftTree full = build_draft_tree(1, lp, TreeShape{.budget = 63, .top_k = 0, .max_depth = 0});
  // Flat costs: more nodes only add expected tokens, so the largest budget wins.
  EXPECT_EQ(BudgetChooser(linear_costs(300e-6, 0.0), 63).choose(full), 63);
  // Expensive nodes: a node is worth verifying only if its probability pays for it.
  const int64_t steep = BudgetChooser(linear_costs(300e-6, 200e-6), 63).choose(full);
  EXPECT_LT(steep, 63);
  EXPECT_GE(steep, 1);
  // The chosen budget maximises the predicted rate among all budgets.
  BudgetChooser c(linear_costs(300e-6, 20e-6), 63);
  const int64_t chosen = c.choose(full);
  double expected = 0, best = 0;
  int64_t argbest = 0;
  for (int64_t b = 1; b <= 63; ++b) {
    expected += std::exp(full.path_log_probs[static_cast<size_t>(b)]);
    const double rate = (1 + expected) / (300e-6 + 20e-6 * static_cast<double>(b + 1));
    if (rate > best) best = rate, argbest = b;
  }
  EXPECT_EQ(chosen, argbest);
}

// The search stops scoring once no larger budget can win, yet lands where a scan of every budget
// does: bucketed step costs (flat within a bucket, as a GPU's are), linear and noisy ones, sharp
// and flat drafters, trees of 127 nodes; and it stops early where the costs climb steeply.
TEST(BudgetChooser, StoppingEarlyChoosesAsTheWholeScan) {
  auto scan = [](const std::vector<double>& costs, const std::vector<double>& scores) {
    double expected = 0, best = -1;
    int64_t argbest = 1;
    for (size_t b = 1; b < scores.size() && b + 1 < costs.size(); ++b) {
      expected += std::exp(scores[b]);
      const double rate = (1 + expected) / costs[b + 1];
      if (rate > best) best = rate, argbest = static_cast<int64_t>(b);
    }
    return argbest;
  };
  RandomStream noise(5);
  std::vector<std::vector<double>> models = {linear_costs(300e-6, 0.0, 128), linear_costs(300e-6, 20e-6, 128),
                                             linear_costs(300e-6, 200e-6, 128)};
  std::vector<double> bucketed(129), noisy(129);
  for (size_t t = 0; t < bucketed.size(); ++t) {
    size_t bucket = 1;
    while (bucket < t) bucket *= 2;
    bucketed[t] = 370e-6 + 1.5e-6 * static_cast<double>(bucket);
    noisy[t] = bucketed[t] * (1.0 + 0.2 * noise.uniform());
  }
  models.push_back(bucketed);
  models.push_back(noisy);
  int64_t stopped_early = 0;
  for (const std::vector<double>& costs : models)
    for (uint64_t seed : {1u, 2u, 3u, 4u})
      for (double sharpness : {1.0, 6.0}) {
        const Matrix lp = seed % 2 ? confident_log_probs(15, 300, seed) : random_log_probs(15, 300, seed, sharpness);
        const DraftTree full = build_draft_tree(1, lp, TreeShape{.budget = 127, .top_k = 0, .max_depth = 0});
        const BudgetChooser c(costs, 127);
        EXPECT_EQ(c.choose(full), scan(costs, full.path_log_probs)) << "seed " << seed << " sharpness " << sharpness;
        BudgetSearch search(c);
        size_t pushed = 0;
        while (pushed + 1 < full.path_log_probs.size() && search.push(full.path_log_probs[pushed + 1])) ++pushed;
        EXPECT_EQ(search.best(), c.choose(full));
        stopped_early += pushed + 1 < 127;
      }
  EXPECT_GT(stopped_early, 0) << "the bound never stopped a search";
}

TEST(BudgetChooser, LearnsHowTheDrafterOverpromisesAndWhatDraftingCosts) {
  const Matrix lp = confident_log_probs(15, 200, 4);
  const DraftTree full = build_draft_tree(1, lp, TreeShape{.budget = 63, .top_k = 0, .max_depth = 0});
  BudgetChooser c(linear_costs(300e-6, 20e-6), 63);
  const int64_t trusting = c.choose(full);
  EXPECT_GT(trusting, 8);
  EXPECT_DOUBLE_EQ(c.calibration(), 1.0);
  // Rounds that accept nothing: the prediction is scaled down and smaller trees follow.
  for (int i = 0; i < 20; ++i) c.observe(truncate_tree(full, trusting), 0, 0.0);
  EXPECT_LT(c.calibration(), 0.2);
  EXPECT_LT(c.choose(full), trusting);
  // A drafter whose rounds cost much more than a node makes each round's fixed cost larger:
  // verifying more nodes per round pays again.
  BudgetChooser slow(linear_costs(300e-6, 20e-6), 63);
  for (int i = 0; i < 5; ++i) slow.observe(truncate_tree(full, 8), 8, 5e-3);
  EXPECT_GE(slow.choose(full), c.choose(full));
}

TEST(BudgetChooser, RefusesACostModelThatCannotVerifyATree) {
  EXPECT_THROW(BudgetChooser(linear_costs(1e-4, 0), 0), Error);
  EXPECT_THROW(BudgetChooser(std::vector<double>(10, 1e-4), 63), Error);
}

}  // namespace
}  // namespace kplan
