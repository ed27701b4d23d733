// select-kernels' residual fusions (compiler/passes/epilogue_adds.h): which matmul -> add pairs
// a matmul's epilogue takes over, and which it must leave alone. (The MoE chain and the lowered
// dumps are checked by tests/golden/lowered.kir; the numbers by the launch emulator's goldens.)
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kplan
