// The lossless check's comparison (tools/kplan/token_diff.h): equal decodes have no difference;
// otherwise the first differing token, or where one decode ended first, in words.
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
