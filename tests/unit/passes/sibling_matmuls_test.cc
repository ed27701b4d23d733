// select-kernels' sibling fusion (compiler/passes/sibling_matmuls.h): which matmuls of the same
// activations one launch computes, and which it leaves alone. (The K2.6 groups and the lowered
// dumps are checked by tests/golden/lowered.kir; the numbers by the launch emulator's goldens.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/passes/fusion_finders.h"
#include "ir/support/error.h"

namespace kplan {
namespace {

using testing_util::find_fusions;

TEST(SiblingMatmuls, MatmulsOfTheSameActivationsGroupInProgramOrderThreeAtMost) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %z: f32[T, 4]) {
    %0 = weight {name = "a", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = weight {name = "b", ckpt = "target"} : bf16[6, 4]
    %3 = matmul(%z, %2) : f32[T, 6]
    %4 = matmul(%x, %2) : f32[T, 6]
    %5 = weight {name = "c", ckpt = "target"} : bf16[2, 4]
    %6 = matmul(%x, %5) : f32[T, 2]
    %7 = matmul(%x, %0) : f32[T, 8]
    output(%1) {name = "a"}
    output(%3) {name = "b"}
    output(%4) {name = "c"}
    output(%6) {name = "d"}
    output(%7) {name = "e"}
  }
}
)");
  const ir::Op* head = f.op(1);
  ASSERT_EQ(f.siblings.later.count(head), 1u);
  EXPECT_EQ(f.siblings.later.at(head), (std::vector<const ir::Op*>{f.op(4), f.op(6)}));
  EXPECT_EQ(f.siblings.first.at(f.op(4)), head);
  EXPECT_EQ(f.siblings.first.at(f.op(6)), head);
  // %z's matmul has no sibling; the fourth matmul of %x starts no group of one.
  EXPECT_EQ(f.siblings.later.count(f.op(3)), 0u);
  EXPECT_EQ(f.siblings.first.count(f.op(3)), 0u);
  EXPECT_EQ(f.siblings.first.count(f.op(7)), 0u);
  EXPECT_EQ(f.siblings.later.count(f.op(7)), 0u);
}

TEST(SiblingMatmuls, LeavesAMatmulWithAFusedResidualAddAlone) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 8]) {
    %0 = weight {name = "a", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = add(%h, %1) : f32[T, 8]
    %3 = weight {name = "b", ckpt = "target"} : bf16[8, 4]
    %4 = matmul(%x, %3) : f32[T, 8]
    output(%2) {name = "y"}
    output(%4) {name = "z"}
  }
}
)");
  ASSERT_EQ(f.epilogue.producers.count(f.op(1)), 1u);
  EXPECT_TRUE(f.siblings.later.empty());
  EXPECT_TRUE(f.siblings.first.empty());
}

// Three matmuls of the same activations (a router, a shared expert's gate and up), in order.
constexpr const char* kThreeMatmulsOfX = R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "a", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = weight {name = "b", ckpt = "target"} : bf16[6, 4]
    %3 = matmul(%x, %2) : f32[T, 6]
    %4 = weight {name = "c", ckpt = "target"} : bf16[6, 4]
    %5 = matmul(%x, %4) : f32[T, 6]
    output(%1) {name = "a"}
    output(%3) {name = "b"}
    output(%5) {name = "c"}
  }
}
)";

// With bf16 activations a router's logits stay f32 while the shared expert's gate and up are
// stored as bf16: the f32 router leads the two (the launch's YA_F32), so it is no launch of its
// own.
TEST(SiblingMatmuls, AnF32FirstSiblingLeadsBf16Ones) {
  const auto f = find_fusions(kThreeMatmulsOfX, {3, 5});
  ASSERT_EQ(f.siblings.later.count(f.op(1)), 1u);
  EXPECT_EQ(f.siblings.later.at(f.op(1)), (std::vector<const ir::Op*>{f.op(3), f.op(5)}));
  EXPECT_EQ(f.siblings.later.count(f.op(3)), 0u);
}
// A bf16 first sibling takes no f32 one after it (the launch's later siblings share one dtype).
TEST(SiblingMatmuls, Bf16SiblingsTakeNoF32OneAfterThem) {
  const auto f = find_fusions(kThreeMatmulsOfX, {1, 5});
  ASSERT_EQ(f.siblings.later.count(f.op(1)), 1u);
  EXPECT_EQ(f.siblings.later.at(f.op(1)), (std::vector<const ir::Op*>{f.op(5)}));
  EXPECT_EQ(f.siblings.first.count(f.op(3)), 0u);
}

// A group whose last two siblings feed one swiglu as its gate and up takes the swiglu (GLU): a
// router beside a shared expert's pair, and a dense MLP's pair alone.
TEST(SiblingMatmuls, TheSwigluOfTheLastTwoSiblingsJoinsTheGroup) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %z: f32[T, 4]) {
    %0 = weight {name = "router", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = weight {name = "gate", ckpt = "target"} : bf16[6, 4]
    %3 = matmul(%x, %2) : f32[T, 6]
    %4 = weight {name = "up", ckpt = "target"} : bf16[6, 4]
    %5 = matmul(%x, %4) : f32[T, 6]
    %6 = swiglu(%3, %5) : f32[T, 6]
    %7 = matmul(%z, %2) : f32[T, 6]
    %8 = matmul(%z, %4) : f32[T, 6]
    %9 = swiglu(%7, %8) : f32[T, 6]
    output(%1) {name = "r"}
    output(%6) {name = "s"}
    output(%9) {name = "m"}
  }
}
)");
  ASSERT_EQ(f.siblings.glu.count(f.op(1)), 1u);
  EXPECT_EQ(f.siblings.glu.at(f.op(1)), f.op(6));
  EXPECT_EQ(f.siblings.glu_of.at(f.op(6)), f.op(1));
  ASSERT_EQ(f.siblings.glu.count(f.op(7)), 1u);
  EXPECT_EQ(f.siblings.glu.at(f.op(7)), f.op(9));
}

// Left alone: a gate read by something else too, a swiglu of (up, gate) order, a pair beside an
// odd number of plain rows (a pair would straddle two warps' rows), a swiglu stored as another
// dtype than its gate and up.
TEST(SiblingMatmuls, LeavesASwigluTheLaunchCannotWrite) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %y: f32[T, 4], %z: f32[T, 4], %w: f32[T, 4]) {
    %0 = weight {name = "gate", ckpt = "target"} : bf16[6, 4]
    %1 = weight {name = "up", ckpt = "target"} : bf16[6, 4]
    %2 = weight {name = "odd", ckpt = "target"} : bf16[7, 4]
    %3 = matmul(%x, %0) : f32[T, 6]
    %4 = matmul(%x, %1) : f32[T, 6]
    %5 = swiglu(%3, %4) : f32[T, 6]
    %6 = matmul(%y, %0) : f32[T, 6]
    %7 = matmul(%y, %1) : f32[T, 6]
    %8 = swiglu(%7, %6) : f32[T, 6]
    %9 = matmul(%z, %2) : f32[T, 7]
    %10 = matmul(%z, %0) : f32[T, 6]
    %11 = matmul(%z, %1) : f32[T, 6]
    %12 = swiglu(%10, %11) : f32[T, 6]
    %13 = matmul(%w, %0) : f32[T, 6]
    %14 = matmul(%w, %1) : f32[T, 6]
    %15 = swiglu(%13, %14) : f32[T, 6]
    output(%5) {name = "a"}
    output(%3) {name = "b"}
    output(%8) {name = "c"}
    output(%9) {name = "d"}
    output(%12) {name = "e"}
    output(%15) {name = "f"}
  }
}
)",
                              {15});
  EXPECT_EQ(f.siblings.later.count(f.op(3)), 1u);
  EXPECT_EQ(f.siblings.later.count(f.op(6)), 1u);
  EXPECT_EQ(f.siblings.later.count(f.op(9)), 1u);
  EXPECT_EQ(f.siblings.later.count(f.op(13)), 1u);
  EXPECT_TRUE(f.siblings.glu.empty());
  EXPECT_TRUE(f.siblings.glu_of.empty());
}

TEST(SiblingMatmulsEnv, ZeroTurnsTheFusionOffAndOtherValuesAreRefused) {
  EXPECT_TRUE(passes::sibling_matmuls_enabled());
  setenv("KPLAN_FUSE_SIBLINGS", "0", 1);
  EXPECT_FALSE(passes::sibling_matmuls_enabled());
  setenv("KPLAN_FUSE_SIBLINGS", "yes", 1);
  EXPECT_THROW(passes::sibling_matmuls_enabled(), Error);
  unsetenv("KPLAN_FUSE_SIBLINGS");
  EXPECT_TRUE(passes::glu_siblings_enabled());
  setenv("KPLAN_FUSE_GLU", "0", 1);
  EXPECT_FALSE(passes::glu_siblings_enabled());
  setenv("KPLAN_FUSE_GLU", "2", 1);
  EXPECT_THROW(passes::glu_siblings_enabled(), Error);
  unsetenv("KPLAN_FUSE_GLU");
}

}  // namespace
}  // namespace kplan
