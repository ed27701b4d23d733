// select-kernels' router fusion (compiler/passes/router_experts.h): which moe_routers the experts'
// gate/up launch runs, and which keep their own launch. (The K2.6 layers and the lowered dumps
// are checked by tests/golden/lowered.kir; the numbers by moe_grouped_host_test.cc's
// RoutedGateUpMatchesTheCpuRouterAndOp.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ir/support/error.h"
#include "tests/unit/passes/fusion_finders.h"

namespace kplan {
namespace {

using testing_util::find_fusions;

// logits -> router (n_group N_GROUP) -> experts; EXTRA is spliced in before the output.
std::string moe_layer(int n_group, const std::string& extra = "") {
  return R"(module {
  func @f(%x: f32[T, 4], %logits: f32[T, 8]) {
    %0 = weight {name = "bias", ckpt = "target"} : f32[8]
    %1, %2 = moe_router(%logits, %0) {top_k = 2, n_group = )" +
         std::to_string(n_group) + R"(, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5} : f32[T, 2], i32[T, 2]
    %3 = weight_stack {name = "g.*", count = 8, ckpt = "target"} : bf16[8, 6, 4]
    %4 = weight_stack {name = "u.*", count = 8, ckpt = "target"} : bf16[8, 6, 4]
    %5 = weight_stack {name = "d.*", count = 8, ckpt = "target"} : bf16[8, 4, 6]
    %6 = moe_experts(%x, %1, %2, %3, %4, %5) : f32[T, 4]
    output(%6) {name = "y"}
)" + extra + R"(  }
}
)";
}

TEST(RouterExperts, AnUngroupedRouterReadOnlyByItsExpertsRunsInTheirLaunch) {
  const auto f = find_fusions(moe_layer(1));
  const ir::Op* router = f.op(1);
  const ir::Op* experts = f.op(5);
  ASSERT_EQ(f.routers.router_of.count(experts), 1u);
  EXPECT_EQ(f.routers.router_of.at(experts), router);
  EXPECT_EQ(f.routers.absorbed.at(router), experts);
}

TEST(RouterExperts, AGroupedRouterKeepsItsLaunch) {
  const auto f = find_fusions(moe_layer(2));  // the group scores need a row of shared memory a warp
  EXPECT_TRUE(f.routers.router_of.empty());
  EXPECT_TRUE(f.routers.absorbed.empty());
}

TEST(RouterExperts, ARouterWithAnotherReaderKeepsItsLaunch) {
  const auto f = find_fusions(moe_layer(1, "    output(%2) {name = \"ids\"}\n"));  // the ids read by the output too
  EXPECT_TRUE(f.routers.absorbed.empty());
}

TEST(RouterExperts, StepsPastWhatTheLaunchRoutesKeepTheRouterLaunch) {
  auto f = find_fusions(moe_layer(1));
  ASSERT_EQ(f.routers.absorbed.size(), 1u);
  const auto views = passes::compute_views(f.fn(), passes::kMaxRoutedTokens + 1, 16, 0, nullptr);
  passes::RouterExperts wide;
  passes::find_router_experts(f.fn(), views, passes::kMaxRoutedTokens + 1, wide);
  EXPECT_TRUE(wide.absorbed.empty()) << "a bucket of " << passes::kMaxRoutedTokens + 1 << " tokens";
}

// The router's logits as the first of a sibling group with a GLU pair (its shared expert's gate and
// up): that group's launch routes it; logits of a lone matmul leave the routing to gate/up.
TEST(RouterExperts, TheLogitsGroupsLaunchRoutesTheRouter) {
  auto layer = [](bool shared) {
    return std::string(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "r", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = weight {name = "bias", ckpt = "target"} : f32[8]
    %3, %4 = moe_router(%1, %2) {top_k = 2, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5} : f32[T, 2], i32[T, 2]
    %5 = weight_stack {name = "g.*", count = 8, ckpt = "target"} : bf16[8, 6, 4]
    %6 = weight_stack {name = "u.*", count = 8, ckpt = "target"} : bf16[8, 6, 4]
    %7 = weight_stack {name = "d.*", count = 8, ckpt = "target"} : bf16[8, 4, 6]
    %8 = moe_experts(%x, %3, %4, %5, %6, %7) : f32[T, 4]
)") + (shared ? R"(    %9 = weight {name = "sg", ckpt = "target"} : bf16[6, 4]
    %10 = matmul(%x, %9) : f32[T, 6]
    %11 = weight {name = "su", ckpt = "target"} : bf16[6, 4]
    %12 = matmul(%x, %11) : f32[T, 6]
    %13 = swiglu(%10, %12) : f32[T, 6]
    output(%13) {name = "s"}
)" : "") + R"(    output(%8) {name = "y"}
  }
}
)";
  };
  const auto f = find_fusions(layer(true));
  ASSERT_EQ(f.routers.absorbed.count(f.op(3)), 1u);
  ASSERT_EQ(f.siblings.glu.count(f.op(1)), 1u) << "the router's logits lead the shared expert's GLU pair";
  ASSERT_EQ(f.routers.logits_router.count(f.op(1)), 1u);
  EXPECT_EQ(f.routers.logits_router.at(f.op(1)), f.op(3));
  EXPECT_EQ(f.routers.logits_of.at(f.op(3)), f.op(1));
  const auto lone = find_fusions(layer(false));
  EXPECT_EQ(lone.routers.absorbed.size(), 1u) << "gate/up still routes";
  EXPECT_TRUE(lone.routers.logits_router.empty()) << "a lone logits matmul";
}

TEST(RouterExpertsEnv, RoutingInTheLogitsLaunchIsTheDefault) {
  EXPECT_TRUE(passes::router_logits_enabled()) << "measured faster on the H100: bench/RESULTS.md";
  setenv("KPLAN_ROUTE_IN_LOGITS", "0", 1);
  EXPECT_FALSE(passes::router_logits_enabled());
  setenv("KPLAN_ROUTE_IN_LOGITS", "2", 1);
  EXPECT_THROW(passes::router_logits_enabled(), Error);
  unsetenv("KPLAN_ROUTE_IN_LOGITS");
}

}  // namespace
}  // namespace kplan
