// select-kernels' residual fusions (compiler/passes/epilogue_adds.h): which matmul -> add pairs
// a matmul's epilogue takes over, and which it must leave alone, and the MoE chain's combine in the
// shared expert's down projection. (The lowered dumps are checked by tests/golden/lowered.kir; the
// numbers by the launch emulator's goldens.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/passes/fusion_finders.h"

namespace kplan {
namespace {

using testing_util::find_fusions;

TEST(EpilogueAdds, AMatmulReadOnlyByAnAddTakesItsResidual) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 8]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = add(%h, %1) : f32[T, 8]
    output(%2) {name = "y"}
  }
}
)");
  const ir::Op* mm = f.op(1);
  const ir::Op* add = f.op(2);
  ASSERT_EQ(f.epilogue.producers.count(mm), 1u);
  EXPECT_EQ(f.epilogue.producers.at(mm).residual, f.fn().args()[1]);
  EXPECT_EQ(f.epilogue.producers.at(mm).out, add->result());
  EXPECT_EQ(f.epilogue.fused_adds.at(add), mm);
  EXPECT_EQ(f.epilogue.unstored.count(mm->result()), 1u);
  EXPECT_EQ(f.epilogue.unstored.count(add->result()), 0u);
}

TEST(EpilogueAdds, LeavesAMatmulWithAnotherReaderAlone) {
  const auto f = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 8]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = add(%h, %1) : f32[T, 8]
    output(%2) {name = "y"}
    output(%1) {name = "m"}
  }
}
)");
  EXPECT_TRUE(f.epilogue.producers.empty());
  EXPECT_TRUE(f.epilogue.fused_adds.empty());
  EXPECT_TRUE(f.epilogue.unstored.empty());
}

TEST(EpilogueAdds, LeavesAStridedOrNarrowedResidualAlone) {
  // A slice of a wider row is no contiguous residual; an add of the matmul to itself has two reads.
  const auto strided = find_fusions(R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 16]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = slice(%h) {axis = 1, start = 0, size = 8} : f32[T, 8]
    %3 = add(%2, %1) : f32[T, 8]
    output(%3) {name = "y"}
  }
}
)");
  EXPECT_TRUE(strided.epilogue.producers.empty());
  const auto twice = find_fusions(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = add(%1, %1) : f32[T, 8]
    output(%2) {name = "y"}
  }
}
)");
  EXPECT_TRUE(twice.epilogue.producers.empty());
}

// routed = moe(x); s = add(routed, shared_down(x)); y = add(h, s): the shared down projection's
// epilogue does both adds and the MoE's combine (ROUTED), the MoE none; with KPLAN_FUSE_COMBINE=0
// the MoE's combine adds h and the down projection adds into that row in place.
constexpr const char* kMoeChain = R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 4], %w: f32[T, 2], %ids: i32[T, 2]) {
    %0 = weight_stack {name = "g.*", count = 3, ckpt = "target"} : bf16[3, 6, 4]
    %1 = weight_stack {name = "u.*", count = 3, ckpt = "target"} : bf16[3, 6, 4]
    %2 = weight_stack {name = "d.*", count = 3, ckpt = "target"} : bf16[3, 4, 6]
    %3 = moe_experts(%x, %w, %ids, %0, %1, %2) : f32[T, 4]
    %4 = weight {name = "sd", ckpt = "target"} : bf16[4, 4]
    %5 = matmul(%x, %4) : f32[T, 4]
    %6 = add(%3, %5) : f32[T, 4]
    %7 = add(%h, %6) : f32[T, 4]
    output(%7) {name = "y"}
  }
}
)";

TEST(EpilogueAdds, TheSharedDownProjectionDoesTheMoeCombine) {
  const auto f = find_fusions(kMoeChain);
  const ir::Op* moe = f.op(3);
  const ir::Op* down = f.op(5);
  ASSERT_EQ(f.epilogue.producers.count(down), 1u);
  EXPECT_EQ(f.epilogue.producers.at(down).residual, f.fn().args()[1]);
  EXPECT_EQ(f.epilogue.producers.at(down).out, f.op(7)->result());
  EXPECT_EQ(f.epilogue.producers.at(down).routed, moe);
  EXPECT_EQ(f.epilogue.combined_by.at(moe), down);
  EXPECT_EQ(f.epilogue.producers.count(moe), 0u) << "the MoE launches no combine";
  EXPECT_EQ(f.epilogue.fused_adds.at(f.op(6)), down);
  EXPECT_EQ(f.epilogue.fused_adds.at(f.op(7)), down);
  for (const ir::Op* op : {moe, down, f.op(6)}) EXPECT_EQ(f.epilogue.unstored.count(op->result()), 1u);

  setenv("KPLAN_FUSE_COMBINE", "0", 1);
  const auto g = find_fusions(kMoeChain);
  unsetenv("KPLAN_FUSE_COMBINE");
  ASSERT_EQ(g.epilogue.producers.count(g.op(3)), 1u);
  EXPECT_EQ(g.epilogue.producers.at(g.op(3)).out, g.op(7)->result());
  EXPECT_EQ(g.epilogue.producers.at(g.op(5)).residual, g.op(7)->result()) << "in place";
  EXPECT_EQ(g.epilogue.producers.at(g.op(5)).routed, nullptr);
  EXPECT_TRUE(g.epilogue.combined_by.empty());
}

}  // namespace
}  // namespace kplan
