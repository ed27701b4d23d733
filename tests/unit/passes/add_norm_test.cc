// compiler/passes/add_norm.h: an add in the launch of the norm right after it.
#include <gtest/gtest.h>

#include "tests/unit/passes/fusion_finders.h"

namespace kplan {
namespace {

using testing_util::find_fusions;

// A first layer's start: the gathered rows (bf16) plus o_proj's product (bf16) into the f32
// residual stream, the post-attention norm right after, a later add reading the sum.
constexpr const char* kFirstLayer = R"(module {
  func @f(%ids: i32[T], %x: f32[T, 8]) {
    %0 = weight {name = "table", ckpt = "target"} : bf16[16, 4]
    %1 = embedding(%ids, %0) : f32[T, 4]
    %2 = weight {name = "o_proj", ckpt = "target"} : bf16[4, 8]
    %3 = matmul(%x, %2) : f32[T, 4]
    %4 = add(%1, %3) : f32[T, 4]
    %5 = weight {name = "g", ckpt = "target"} : bf16[4]
    %6 = rms_norm(%4, %5) {eps = 1e-06} : f32[T, 4]
    %7 = add(%4, %6) : f32[T, 4]
    output(%7) {name = "y"}
  }
}
)";

// bf16 gathered rows and product: o_proj's epilogue cannot take the add (the residual stream is
// f32), so the norm's launch does it.
TEST(AddNorms, TheNormRightAfterAnUnfusedAddLaunchesIt) {
  const auto f = find_fusions(kFirstLayer, {1, 3, 6});
  EXPECT_FALSE(f.epilogue.fused_adds.count(f.op(4)));
  ASSERT_EQ(f.add_norms.add_of.count(f.op(6)), 1u);
  EXPECT_EQ(f.add_norms.add_of.at(f.op(6)), f.op(4));
  EXPECT_EQ(f.add_norms.absorbed.at(f.op(4)), f.op(6));
}

// All f32: o_proj's epilogue does the add, which launches nothing for the norm to take.
TEST(AddNorms, NotAnAddAnEpilogueDoes) {
  const auto f = find_fusions(kFirstLayer);
  EXPECT_EQ(f.epilogue.fused_adds.count(f.op(4)), 1u);
  EXPECT_TRUE(f.add_norms.add_of.empty());
}

// An op between the add and the norm (here a matmul reading an operand of the add) leaves them
// two launches: the fused launch would run where the norm is.
TEST(AddNorms, NotWhenAnOpComesBetweenTheAddAndTheNorm) {
  const auto f = find_fusions(R"(module {
  func @f(%a: f32[T, 4], %b: f32[T, 4]) {
    %0 = add(%a, %b) : f32[T, 4]
    %1 = weight {name = "w", ckpt = "target"} : bf16[4, 4]
    %2 = matmul(%a, %1) : f32[T, 4]
    %3 = weight {name = "g", ckpt = "target"} : bf16[4]
    %4 = rms_norm(%0, %3) {eps = 1e-06} : f32[T, 4]
    %5 = add(%2, %4) : f32[T, 4]
    output(%0) {name = "h"}
    output(%5) {name = "y"}
  }
}
)");
  EXPECT_TRUE(f.add_norms.add_of.empty());
}

// A norm the norm fusion puts in its matmul's launch: the add keeps its own launch.
TEST(AddNorms, NotWhereTheNormRunsInAMatmul) {
  const auto f = find_fusions(R"(module {
  func @f(%a: f32[T, 4], %b: f32[T, 4]) {
    %0 = add(%a, %b) : f32[T, 4]
    %1 = weight {name = "g", ckpt = "target"} : bf16[4]
    %2 = rms_norm(%0, %1) {eps = 1e-06} : f32[T, 4]
    %3 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %4 = matmul(%2, %3) : f32[T, 8]
    output(%0) {name = "h"}
    output(%4) {name = "y"}
  }
}
)");
  ASSERT_EQ(f.norms.absorbed.count(f.op(2)), 1u);
  EXPECT_TRUE(f.add_norms.add_of.empty());
}

}  // namespace
}  // namespace kplan
