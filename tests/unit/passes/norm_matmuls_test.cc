// select-kernels' norm fusion (compiler/passes/norm_matmuls.h): which rms_norms the launch of the
// matmul that first reads them computes, when that launch stores the norm's rows too, and which
// norms keep their own launch. (The K2.6 layers and the lowered dumps are checked by
// tests/golden/lowered.kir; the numbers by the launch emulator and matmul_fusions_host_test.cc.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/support/error.h"
#include "tests/unit/passes/fusion_finders.h"

namespace kplan {
namespace {

using testing_util::find_fusions;

// A norm whose only reader is a matmul.
constexpr const char* kNormThenMatmul = R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "g", ckpt = "target"} : bf16[4]
    %1 = rms_norm(%x, %0) {eps = 1e-06} : f32[T, 4]
    %2 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %3 = matmul(%1, %2) : f32[T, 8]
    output(%3) {name = "y"}
  }
}
)";

TEST(NormMatmuls, ANormReadOnlyByAMatmulIsComputedByItsLaunch) {
  const auto f = find_fusions(kNormThenMatmul);
  ASSERT_EQ(f.norms.consumers.count(f.op(3)), 1u);
  EXPECT_EQ(f.norms.consumers.at(f.op(3)).norm, f.op(1));
  EXPECT_FALSE(f.norms.consumers.at(f.op(3)).store) << "nothing else reads the norm";
  EXPECT_EQ(f.norms.absorbed.at(f.op(1)), f.op(3));
}

// KPLAN_FUSE_NORM's list: a norm folds only into the kinds of first reader taken.
TEST(NormMatmuls, OnlyTheReadersTakenFoldTheirNorm) {
  const auto matmuls = find_fusions(kNormThenMatmul, {}, passes::NormReader::Matmul);
  EXPECT_EQ(matmuls.norms.absorbed.count(matmuls.op(1)), 1u);
  const auto others = find_fusions(kNormThenMatmul, {}, passes::NormReader::LmHead | passes::NormReader::Siblings);
  EXPECT_TRUE(others.norms.absorbed.empty()) << "a lone matmul's norm, not taken";
}

// Exact folds (the default): only a norm whose rows are bf16 and read by its matmul alone (the
// launch rounds them as the norm would store them and stores nothing).
TEST(NormMatmuls, ExactFoldsTakeOnlyBf16RowsNoOtherOpReads) {
  const auto bf16 = find_fusions(kNormThenMatmul, {1}, passes::NormReader::Matmul, /*exact_norms=*/true);
  ASSERT_EQ(bf16.norms.consumers.count(bf16.op(3)), 1u);
  EXPECT_TRUE(bf16.norms.consumers.at(bf16.op(3)).exact);
  EXPECT_FALSE(bf16.norms.consumers.at(bf16.op(3)).store);
  const auto f32 = find_fusions(kNormThenMatmul, {}, passes::NormReader::Matmul, /*exact_norms=*/true);
  EXPECT_TRUE(f32.norms.absorbed.empty()) << "f32 rows: the norm keeps its launch";
  const auto summed = find_fusions(kNormThenMatmul, {1}, passes::NormReader::Matmul);
  ASSERT_EQ(summed.norms.consumers.count(summed.op(3)), 1u);
  EXPECT_FALSE(summed.norms.consumers.at(summed.op(3)).exact);
  const auto stored = find_fusions(R"(module {
  func @f(%x: bf16[T, 4]) {
    %0 = weight {name = "g", ckpt = "target"} : bf16[4]
    %1 = rms_norm(%x, %0) {eps = 1e-06} : bf16[T, 4]
    %2 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %3 = matmul(%1, %2) : f32[T, 8]
    output(%3) {name = "y"}
    output(%1) {name = "n"}
  }
}
)",
                                   {1}, passes::NormReader::Matmul, /*exact_norms=*/true);
  EXPECT_TRUE(stored.norms.absorbed.empty()) << "the output reads the rows too";
}

// A MoE layer's norm: a sibling group (its first member launches) and the routed experts read it;
// the group's launch stores the rows for the experts.
TEST(NormMatmuls, ASiblingGroupTakesTheNormAndStoresItForTheOtherReaders) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "g", ckpt = "target"} : bf16[4]
    %1 = rms_norm(%x, %0) {eps = 1e-06} : f32[T, 4]
    %2 = weight {name = "a", ckpt = "target"} : bf16[8, 4]
    %3 = matmul(%1, %2) : f32[T, 8]
    %4 = weight {name = "b", ckpt = "target"} : bf16[6, 4]
    %5 = matmul(%1, %4) : f32[T, 6]
    output(%3) {name = "a"}
    output(%5) {name = "b"}
    output(%1) {name = "n"}
  }
}
)");
  ASSERT_EQ(f.siblings.later.count(f.op(3)), 1u);
  ASSERT_EQ(f.norms.consumers.count(f.op(3)), 1u);
  EXPECT_TRUE(f.norms.consumers.at(f.op(3)).store) << "the output reads the norm too";
  EXPECT_EQ(f.norms.consumers.count(f.op(5)), 0u) << "a later sibling launches nothing";
}

// Norms that keep their launch: one whose first reader is no matmul (an add), and one stored as
// bf16 that another op reads after the matmul (the launch writes the rows in its x's dtype, f32).
TEST(NormMatmuls, LeavesANormWithAnotherFirstReaderOrAStoredDtypeOfItsOwn) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "g", ckpt = "target"} : bf16[4]
    %1 = rms_norm(%x, %0) {eps = 1e-06} : f32[T, 4]
    %2 = add(%1, %x) : f32[T, 4]
    %3 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %4 = matmul(%1, %3) : f32[T, 8]
    %5 = rms_norm(%x, %0) {eps = 1e-06} : f32[T, 4]
    %6 = matmul(%5, %3) : f32[T, 8]
    %7 = add(%5, %x) : f32[T, 4]
    %8 = rms_norm(%x, %0) {eps = 1e-06} : f32[T, 4]
    %9 = matmul(%8, %3) : f32[T, 8]
    output(%2) {name = "a"}
    output(%4) {name = "b"}
    output(%6) {name = "c"}
    output(%7) {name = "d"}
    output(%9) {name = "e"}
  }
}
)",
                              /*bf16_results=*/{5, 8});
  EXPECT_EQ(f.norms.absorbed.count(f.op(1)), 0u) << "its first reader is an add";
  EXPECT_EQ(f.norms.absorbed.count(f.op(5)), 0u) << "bf16 rows an add reads too";
  ASSERT_EQ(f.norms.absorbed.count(f.op(8)), 1u) << "bf16 rows only its matmul reads: never stored";
  EXPECT_FALSE(f.norms.consumers.at(f.op(9)).store);
}

TEST(NormMatmulsEnv, ExactByDefaultZeroOffOtherValuesSummedInOrRefused) {
  EXPECT_EQ(passes::norm_folds().readers, passes::NormReader::Matmul) << "default: the exact folds into lone matmuls";
  EXPECT_TRUE(passes::norm_folds().exact);
  setenv("KPLAN_FUSE_NORM", "exact", 1);
  EXPECT_TRUE(passes::norm_folds().exact);
  setenv("KPLAN_FUSE_NORM", "0", 1);
  EXPECT_EQ(passes::norm_folds().readers, 0u);
  setenv("KPLAN_FUSE_NORM", "1", 1);
  EXPECT_EQ(passes::norm_folds().readers, passes::NormReader::AnyReader);
  EXPECT_FALSE(passes::norm_folds().exact);
  setenv("KPLAN_FUSE_NORM", "lm_head,matmul", 1);
  EXPECT_EQ(passes::norm_folds().readers, passes::NormReader::LmHead | passes::NormReader::Matmul);
  EXPECT_FALSE(passes::norm_folds().exact);
  setenv("KPLAN_FUSE_NORM", "on", 1);
  EXPECT_THROW(passes::norm_folds(), Error);
  setenv("KPLAN_FUSE_NORM", "lm_head,router", 1);
  EXPECT_THROW(passes::norm_folds(), Error);
  unsetenv("KPLAN_FUSE_NORM");
  EXPECT_TRUE(passes::combine_in_shared_enabled());
  setenv("KPLAN_FUSE_COMBINE", "0", 1);
  EXPECT_FALSE(passes::combine_in_shared_enabled());
  setenv("KPLAN_FUSE_COMBINE", "2", 1);
  EXPECT_THROW(passes::combine_in_shared_enabled(), Error);
  unsetenv("KPLAN_FUSE_COMBINE");
}

}  // namespace
}  // namespace kplan
