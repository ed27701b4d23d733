// The lossless checks' comparison (tools/kplan/token_diff.h): equal decodes have no difference;
// otherwise the first differing token, or where one decode ended first, in words; and `kplan run
// --compare`'s verdict on two token lists (the line, or the error naming both tokens).
#include "tools/kplan/token_diff.h"

#include <vector>

#include <gtest/gtest.h>

namespace kplan::cli {
namespace {

TEST(TokenDiff, EqualDecodesHaveNoDifference) {
  const std::vector<int32_t> a = {1, 2, 3};
  EXPECT_FALSE(first_difference(a, a).has_value());
  EXPECT_FALSE(first_difference(std::vector<int32_t>{}, std::vector<int32_t>{}).has_value());
}

TEST(TokenDiff, NamesTheFirstDifferingToken) {
  const std::vector<int32_t> ar = {7, 8, 9, 10}, tree = {7, 8, 4, 11};
  const auto d = first_difference(ar, tree);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->index, 2u);
  EXPECT_EQ(describe_difference("DDTree budget 16", "AR", *d),
            "DDTree budget 16 differs from AR at token 3: DDTree budget 16 has 4 where AR has 9");
}

TEST(TokenDiff, NamesWhichDecodeEndedFirst) {
  const std::vector<int32_t> ar = {7, 8, 9}, shorter = {7, 8}, longer = {7, 8, 9, 5};
  EXPECT_EQ(describe_difference("DFlash chain", "AR", *first_difference(ar, shorter)),
            "DFlash chain differs from AR at token 3: DFlash chain ended where AR has 9");
  EXPECT_EQ(describe_difference("DFlash chain", "AR", *first_difference(ar, longer)),
            "DFlash chain differs from AR at token 4: DFlash chain has 5 where AR ended");
}

}  // namespace
}  // namespace kplan::cli

namespace kplan::cli {
namespace {

// `kplan run --compare`'s verdict on two token lists: the line for equal decodes, else one error
// naming the first differing token (counted from 1) and both decodes' tokens there.
TEST(CompareWithAR, EqualTokensGiveTheVerdictLine) {
  const std::vector<int32_t> ar = {7, 8, 9};
  EXPECT_EQ(check_same_as_ar("DDTree budget 16", ar, ar, describe_sampling(0, 0)),
            "compare: DDTree budget 16 emits AR's 3 tokens (greedy)");
  EXPECT_EQ(check_same_as_ar("DFlash chain", ar, ar, describe_sampling(0.7, 3)),
            "compare: DFlash chain emits AR's 3 tokens (temperature 0.7, seed 3: lossless sampling)");
}

TEST(CompareWithAR, DifferentTokensFailNamingTheFirstOne) {
  const std::vector<int32_t> ar = {7, 8, 9, 10}, tree = {7, 8, 4, 10};
  try {
    check_same_as_ar("DDTree budget 16", ar, tree, describe_sampling(0, 0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--compare: DDTree budget 16 differs from AR at token 3: DDTree budget 16 has 4 where AR "
                           "has 9 (greedy)");
  }
  const std::vector<int32_t> shorter = {7, 8, 9};
  try {
    check_same_as_ar("DFlash chain", ar, shorter, describe_sampling(1.5, 2));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--compare: DFlash chain differs from AR at token 4: DFlash chain ended where AR has 10 "
                           "(temperature 1.5, seed 2: lossless sampling)");
  }
}

}  // namespace
}  // namespace kplan::cli
