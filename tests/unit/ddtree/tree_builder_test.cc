// The tree builder: the heap picks exactly the `budget` best nodes by path log-probability
// (checked against brute-force enumeration of every path), parents precede children, and the
// mask is ancestor-only.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "runtime/ddtree/draft_tree.h"
#include "runtime/ddtree/log_softmax.h"
#include "runtime/ddtree/random_stream.h"
#include "ir/support/tree_mask.h"

namespace kplan {
namespace {

Matrix random_log_probs(int64_t depth, int64_t vocab, uint64_t seed) {
  RandomStream random(seed);
  Matrix m(depth, vocab);
  for (float& v : m.data) v = static_cast<float>(5.0 * random.uniform());
  log_softmax_rows(m);
  return m;
}

// The builder normalises its input once more; score against exactly what it sees.
Matrix as_builder_sees(Matrix m) {
  log_softmax_rows(m);
  return m;
}

// Every path of length 1..depth over the whole vocabulary, with its log-probability summed in
// depth order (as the builder sums it), best first.
std::vector<std::pair<double, std::vector<int32_t>>> all_paths(const Matrix& lp) {
  std::vector<std::pair<double, std::vector<int32_t>>> paths;
  std::function<void(std::vector<int32_t>&, double)> extend = [&](std::vector<int32_t>& path,
                                                                   double score) {
    if (static_cast<int64_t>(path.size()) == lp.rows) return;
    for (int32_t v = 0; v < lp.cols; ++v) {
      path.push_back(v);
      const double s = score + static_cast<double>(lp.row(path.size() - 1)[v]);
      paths.emplace_back(s, path);
      extend(path, s);
      path.pop_back();
    }
  };
  std::vector<int32_t> path;
  extend(path, 0.0);
  std::stable_sort(paths.begin(), paths.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return paths;
}

std::vector<int32_t> path_of(const DraftTree& tree, int32_t node) {
  std::vector<int32_t> path;
  for (; node > 0; node = tree.parents[node]) path.push_back(tree.tokens[node]);
  std::reverse(path.begin(), path.end());
  return path;
}

TEST(TreeBuilder, HeapPicksTopBudgetNodesLikeBruteForce) {
  int cases = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed)
    for (int64_t vocab : {2, 3, 5, 8})
      for (int64_t depth : {1, 2, 3, 4}) {
        const Matrix lp = random_log_probs(depth, vocab, seed * 100 + vocab * 10 + depth);
        const auto brute = all_paths(as_builder_sees(lp));
        for (int64_t budget : {1, 2, 3, 5, 7, 16, 40, 10000}) {
          const DraftTree tree = build_draft_tree(9, lp, {budget, 0, 0});
          const int64_t expect = std::min<int64_t>(budget, static_cast<int64_t>(brute.size()));
          ASSERT_EQ(tree.size(), 1 + expect);
          std::vector<double> scores(tree.path_log_probs.begin() + 1, tree.path_log_probs.end());
          std::sort(scores.rbegin(), scores.rend());
          for (int64_t i = 0; i < expect; ++i)
            ASSERT_EQ(scores[i], brute[i].first) << "seed " << seed << " vocab " << vocab
                                                 << " depth " << depth << " budget " << budget;
          // Without a tie at the cut, the set of paths is unique: compare it too.
          if (expect < static_cast<int64_t>(brute.size()) &&
              brute[expect - 1].first == brute[expect].first)
            continue;
          std::vector<std::vector<int32_t>> got, want;
          for (int32_t i = 1; i < tree.size(); ++i) got.push_back(path_of(tree, i));
          for (int64_t i = 0; i < expect; ++i) want.push_back(brute[i].second);
          std::sort(got.begin(), got.end());
          std::sort(want.begin(), want.end());
          ASSERT_EQ(got, want);
          ++cases;
        }
      }
  EXPECT_GT(cases, 500);
}

// --budget auto on device rounds chooses on the scores alone: the same pops as the tree, ties
// (a coarse grid of log-probabilities makes many) included, at every budget, depth and top-k.
TEST(TreeBuilder, ScoresAloneAreTheTreesPathLogProbs) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const int64_t depth = 6, width = 40;
    RandomStream random(seed);
    DepthCandidates c;
    c.depth = depth;
    c.k = width;
    for (int64_t d = 0; d < depth; ++d) {
      std::vector<float> row(static_cast<size_t>(width));
      for (float& v : row) v = -static_cast<float>(random.uniform_int(6)) * 0.5f;  // ties on purpose
      std::sort(row.begin(), row.end(), std::greater<float>());
      for (int64_t r = 0; r < width; ++r) {
        c.ids.push_back(static_cast<int32_t>(d * width + r));
        c.log_probs.push_back(row[static_cast<size_t>(r)]);
      }
    }
    for (int64_t budget : {0, 1, 7, 39, 127, 400})
      for (int64_t max_depth : {0, 1, 4})
        for (int64_t top_k : {0, 1, 3}) {
          const TreeShape shape{.budget = budget, .top_k = top_k, .max_depth = max_depth};
          EXPECT_EQ(draft_tree_scores(c.log_probs, width, shape), build_draft_tree(5, c, shape).path_log_probs)
              << "seed " << seed << " budget " << budget << " depth " << max_depth << " top_k " << top_k;
        }
  }
  EXPECT_THROW(draft_tree_scores(std::vector<float>(7), 3, TreeShape{.budget = 4}), Error);
}

TEST(TreeBuilder, NodesAreConsistent) {
  const Matrix raw = random_log_probs(7, 50, 42);
  const DraftTree tree = build_draft_tree(17, raw, {64, 0, 0});
  const Matrix lp = as_builder_sees(raw);
  ASSERT_EQ(tree.size(), 65);
  EXPECT_EQ(tree.tokens[0], 17);
  EXPECT_EQ(tree.parents[0], -1);
  EXPECT_EQ(tree.depths[0], 0);
  std::map<std::pair<int32_t, int32_t>, int> siblings;
  for (int32_t i = 1; i < tree.size(); ++i) {
    const int32_t p = tree.parents[i];
    ASSERT_GE(p, 0);
    ASSERT_LT(p, i);
    EXPECT_EQ(tree.depths[i], tree.depths[p] + 1);
    EXPECT_EQ(tree.path_log_probs[i],
              tree.path_log_probs[p] + static_cast<double>(lp.row(tree.depths[i] - 1)[tree.tokens[i]]));
    EXPECT_EQ(++siblings[std::make_pair(p, tree.tokens[i])], 1) << "two children of one node share a token";
    // Picked in best-first order: no node scores above an earlier one.
    if (i >= 2) {
      EXPECT_LE(tree.path_log_probs[i], tree.path_log_probs[i - 1]);
    }
  }
}

TEST(TreeBuilder, MaskIsAncestorOnly) {
  for (int64_t budget : {1, 5, 31, 32, 70, 200}) {
    const DraftTree tree = build_draft_tree(3, random_log_probs(9, 12, budget), {budget, 0, 0});
    const int64_t n = tree.size();
    ASSERT_EQ(static_cast<int64_t>(tree.mask.size()), n * mask_words(n));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<bool> ancestor(static_cast<size_t>(n), false);
      for (int32_t a = static_cast<int32_t>(i); a >= 0; a = tree.parents[a]) ancestor[a] = true;
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(mask_bit(tree.mask, n, i, j), ancestor[j]) << "budget " << budget << " row " << i
                                                             << " col " << j;
      // Padding bits past the last node stay clear.
      for (int64_t j = n; j < mask_words(n) * 32; ++j) ASSERT_FALSE(mask_bit(tree.mask, n, i, j));
    }
  }
}

TEST(TreeBuilder, TopOneGivesTheArgmaxChain) {
  const Matrix lp = random_log_probs(7, 30, 5);
  const DraftTree tree = build_draft_tree(4, lp, {7, 1, 0});
  ASSERT_EQ(tree.size(), 8);
  for (int32_t i = 1; i < 8; ++i) {
    EXPECT_EQ(tree.parents[i], i - 1);
    EXPECT_EQ(tree.depths[i], i);
    const float* row = lp.row(i - 1);
    EXPECT_EQ(tree.tokens[i], std::max_element(row, row + 30) - row);
  }
}

TEST(TreeBuilder, DepthLimitAndEmptyCases) {
  const Matrix lp = random_log_probs(7, 4, 8);
  const DraftTree limited = build_draft_tree(0, lp, {100, 0, 2});
  EXPECT_EQ(limited.size(), 1 + 4 + 16);  // every path up to depth 2
  for (int32_t d : limited.depths) EXPECT_LE(d, 2);

  const DraftTree root_only = build_draft_tree(5, lp, {0, 0, 0});
  ASSERT_EQ(root_only.size(), 1);
  EXPECT_EQ(root_only.mask, std::vector<uint32_t>{1u});
  EXPECT_EQ(build_draft_tree(5, Matrix(0, 4), {10, 0, 0}).size(), 1);
}

TEST(TreeBuilder, StepInputPositionsAreRootPlusDepth) {
  const DraftTree tree = build_draft_tree(11, random_log_probs(5, 6, 9), {20, 0, 0});
  const StepInput in = tree_step_input(tree, 100);
  ASSERT_EQ(in.tokens, tree.tokens);
  ASSERT_EQ(in.tree_mask, tree.mask);
  for (int64_t i = 0; i < tree.size(); ++i) EXPECT_EQ(in.positions[i], 100 + tree.depths[i]);
}

TEST(TreeMask, RejectsAParentAfterItsChild) {
  const std::vector<int32_t> bad = {-1, 2, 0};
  EXPECT_THROW(ancestor_mask(bad), Error);
  const std::vector<int32_t> chain = {-1, 0, 1};
  EXPECT_EQ(ancestor_mask(chain), (std::vector<uint32_t>{0b001u, 0b011u, 0b111u}));
}

}  // namespace
}  // namespace kplan
