// select-kernels' router fusion (compiler/passes/router_experts.h): which moe_routers the experts'
// gate/up launch runs, and which keep their own launch. (The K2.6 layers and the lowered dumps
// are checked by tests/golden/lowered.kir; the numbers by moe_grouped_host_test.cc's
// RoutedGateUpMatchesTheCpuRouterAndOp.)
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace kplan
