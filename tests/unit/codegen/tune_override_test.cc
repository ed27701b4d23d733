// KPLAN_TUNE's entries (compiler/codegen/heuristics/tune_override.h): parsing, matching on the
// instance's parameters, and clear errors for malformed entries or non-tuning parameters.
#include <gtest/gtest.h>

#include "compiler/codegen/families/all.h"
#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/codegen/heuristics/tune_override.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_tune_overrides(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TuneOverride, ParsesFamiliesConditionsAndValues) {
  const auto o = parse_tune_overrides(" matmul[W_LAYOUT=1, K=128]:UNROLL=16,KSPLIT=8 ; moe_grouped_down:PF=2;");
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].family, "matmul");
  EXPECT_EQ(o[0].when, (ParamValues{{"W_LAYOUT", 1}, {"K", 128}}));
  EXPECT_EQ(o[0].set, (ParamValues{{"UNROLL", 16}, {"KSPLIT", 8}}));
  EXPECT_EQ(o[1].family, "moe_grouped_down");
  EXPECT_TRUE(o[1].when.empty());
  EXPECT_EQ(o[1].set, (ParamValues{{"PF", 2}}));
  EXPECT_TRUE(parse_tune_overrides("").empty());
}

TEST(TuneOverride, MalformedEntriesNameTheEntry) {
  EXPECT_NE(error_of("matmul").find("KPLAN_TUNE entry 'matmul': expected FAMILY"), std::string::npos);
  EXPECT_NE(error_of("matmul:UNROLL").find("expected NAME=VALUE"), std::string::npos);
  EXPECT_NE(error_of("matmul:UNROLL=x").find("the value of UNROLL must be an integer, not 'x'"), std::string::npos);
  EXPECT_NE(error_of("matmul[W_LAYOUT=1:UNROLL=2").find("must end with ']'"), std::string::npos);
  EXPECT_NE(error_of(":UNROLL=2").find("no family name"), std::string::npos);
  EXPECT_NE(error_of("matmul:").find("sets nothing"), std::string::npos);
}

TEST(TuneOverride, AppliesWhereTheConditionsHoldAndReplacesGivenValues) {
  const auto o = parse_tune_overrides("matmul[W_LAYOUT=1]:UNROLL=16;matmul[W_LAYOUT=0]:RPW=2;rms_norm:THREADS=64");
  ParamValues wuk = {{"K", 128}, {"N", 512}, {"W_LAYOUT", 1}, {"UNROLL", 4}};
  apply_tune_overrides(o, matmul::family(), wuk);
  EXPECT_EQ(wuk.at("UNROLL"), 16);
  EXPECT_EQ(wuk.count("RPW"), 0u);
  ParamValues dense = {{"K", 7168}, {"N", 8192}, {"W_LAYOUT", 0}};
  apply_tune_overrides(o, matmul::family(), dense);
  EXPECT_EQ(dense.at("RPW"), 2);
  EXPECT_EQ(dense.count("UNROLL"), 0u);
  ParamValues no_layout = {{"K", 7168}, {"N", 8192}};  // a condition on a parameter not held: no match
  apply_tune_overrides(o, matmul::family(), no_layout);
  EXPECT_EQ(no_layout.size(), 2u);
}

TEST(TuneOverride, RefusesProblemParameters) {
  const auto o = parse_tune_overrides("matmul:K=64");
  ParamValues p = {{"K", 128}, {"N", 512}, {"W_LAYOUT", 0}};
  try {
    apply_tune_overrides(o, matmul::family(), p);
    FAIL() << "K is a problem dimension, not a tuning parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K is not a tuning parameter of kernel family matmul"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kplan::codegen
