// The walk follows the target's pick from the root while a child carries it.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/sample_draws.h"
#include "ir/support/tree_mask.h"
#include "runtime/ddtree/tree_walk.h"

namespace kplan {
namespace {

// root(7) -> {1: a=3, 2: b=5}; 1 -> {3: c=2}; 2 -> {4: d=2}
DraftTree handmade_tree() {
  DraftTree t;
  t.tokens = {7, 3, 5, 2, 2};
  t.depths = {0, 1, 1, 2, 2};
  t.parents = {-1, 0, 0, 1, 2};
  t.path_log_probs = {0, -1, -2, -3, -4};
  t.mask = ancestor_mask(t.parents);
  return t;
}

Matrix logits_with_argmax(const std::vector<int32_t>& best, int64_t vocab) {
  Matrix m(static_cast<int64_t>(best.size()), vocab);
  for (size_t i = 0; i < best.size(); ++i) m.row(static_cast<int64_t>(i))[best[i]] = 1.0f;
  return m;
}

TEST(TreeWalk, GreedyFollowsTheArgmaxDownTheMatchingBranch) {
  TokenSampler greedy(0.0, 0);
  const WalkResult r = walk_tree(handmade_tree(), logits_with_argmax({5, 0, 2, 0, 6}, 8), greedy);
  EXPECT_EQ(r.accepted, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(r.next_token, 6);
}

TEST(TreeWalk, StopsAtTheRootWhenNoChildMatches) {
  TokenSampler greedy(0.0, 0);
  const WalkResult r = walk_tree(handmade_tree(), logits_with_argmax({4, 0, 0, 0, 0}, 8), greedy);
  EXPECT_EQ(r.accepted, (std::vector<int32_t>{0}));
  EXPECT_EQ(r.next_token, 4);
}

TEST(TreeWalk, ArgmaxTiesGoToTheLowestId) {
  const float v[] = {0.5f, 2.0f, 2.0f, 1.0f};
  EXPECT_EQ(argmax(v, 4), 1);
}

TEST(TokenSampler, SamplesFollowTheSoftmax) {
  // A coarse check of the sampler alone (the decode-level chi-square tests are the real ones).
  TokenSampler sampler(1.0, 123);
  const float logits[] = {0.0f, 1.0f, -30.0f};
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i) ++counts[sampler.pick(logits, 3)];
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[1] / 20000.0, 0.7311, 0.015);
}

// Pick k takes draw k of the seed (ir/support/sample_draws.h), whatever came before it: the
// contract a device round's round_sample relies on to draw a whole tree's picks at once. Over two
// tokens of weights 1 and e, pick k is token 1 exactly when draw k * total lands past weight 1.
TEST(TokenSampler, PickKTakesDrawKOfTheSeed) {
  for (uint64_t seed : {0ull, 7ull, 0xFFFFFFFFFFFFFFFFull}) {
    TokenSampler sampler(1.0, seed);
    const float logits[] = {0.0f, 1.0f};
    const double total = 1.0 + std::exp(1.0);
    for (uint64_t k = 0; k < 200; ++k) {
      EXPECT_EQ(sampler.draws(), k);
      const int32_t expected = draws::uniform(seed, k) * total < 1.0 ? 0 : 1;
      ASSERT_EQ(sampler.pick(logits, 2), expected) << "seed " << seed << " pick " << k;
    }
  }
  // Draws are distinct across indices and seeds (no counter or seed collision in the key).
  EXPECT_NE(draws::uniform(1, 0), draws::uniform(0, 1));
  EXPECT_NE(draws::uniform(1, 0), draws::uniform(1, 1));
  EXPECT_EQ(draws::draw_index(-40, 52, 3), 15u);
}

}  // namespace
}  // namespace kplan
