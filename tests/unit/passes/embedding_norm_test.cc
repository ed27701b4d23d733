// compiler/passes/embedding_norm.h: the embedding gather in its first norm's launch.
#include <gtest/gtest.h>

#include "tests/unit/passes/fusion_finders.h"

namespace kplan {
namespace {

using testing_util::find_fusions;

// The step's start: a gather, the first layer's norm over it, the residual add reading it later.
constexpr const char* kGatherThenNorm = R"(module {
  func @f(%ids: i32[T]) {
    %0 = weight {name = "table", ckpt = "target"} : bf16[16, 4]
    %1 = embedding(%ids, %0) : f32[T, 4]
    %2 = weight {name = "g", ckpt = "target"} : bf16[4]
    %3 = rms_norm(%1, %2) {eps = 1e-06} : f32[T, 4]
    %4 = add(%1, %3) : f32[T, 4]
    output(%4) {name = "y"}
  }
}
)";

TEST(EmbeddingNorms, TheFirstNormOfAGatherLaunchesIt) {
  const auto f = find_fusions(kGatherThenNorm);
  ASSERT_EQ(f.gathers.gather_of.count(f.op(3)), 1u);
  EXPECT_EQ(f.gathers.gather_of.at(f.op(3)), f.op(1));
  EXPECT_EQ(f.gathers.absorbed.at(f.op(1)), f.op(3));
}

// A norm the norm fusion puts in its matmul's launch is not launched by its own rule: the gather
// keeps its launch.
TEST(EmbeddingNorms, NotWhereTheNormRunsInAMatmul) {
  const auto f = find_fusions(R"(module {
  func @f(%ids: i32[T]) {
    %0 = weight {name = "table", ckpt = "target"} : bf16[16, 4]
    %1 = embedding(%ids, %0) : f32[T, 4]
    %2 = weight {name = "g", ckpt = "target"} : bf16[4]
    %3 = rms_norm(%1, %2) {eps = 1e-06} : f32[T, 4]
    %4 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %5 = matmul(%3, %4) : f32[T, 8]
    output(%5) {name = "y"}
  }
}
)");
  ASSERT_EQ(f.norms.absorbed.count(f.op(3)), 1u);
  EXPECT_TRUE(f.gathers.absorbed.empty());
}

// Another first reader (the add before the norm) leaves the gather alone.
TEST(EmbeddingNorms, NotWhenSomethingElseReadsTheRowsFirst) {
  const auto f = find_fusions(R"(module {
  func @f(%ids: i32[T], %x: f32[T, 4]) {
    %0 = weight {name = "table", ckpt = "target"} : bf16[16, 4]
    %1 = embedding(%ids, %0) : f32[T, 4]
    %2 = add(%1, %x) : f32[T, 4]
    %3 = weight {name = "g", ckpt = "target"} : bf16[4]
    %4 = rms_norm(%1, %3) {eps = 1e-06} : f32[T, 4]
    output(%2) {name = "a"}
    output(%4) {name = "y"}
  }
}
)");
  EXPECT_TRUE(f.gathers.absorbed.empty());
}

}  // namespace
}  // namespace kplan
