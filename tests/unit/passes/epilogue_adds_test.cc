// select-kernels' residual fusions (compiler/passes/epilogue_adds.h): which matmul -> add pairs
// a matmul's epilogue takes over, and which it must leave alone. (The MoE chain and the lowered
// dumps are checked by tests/golden/lowered.kir; the numbers by the launch emulator's goldens.)
#include <gtest/gtest.h>

#include "compiler/passes/epilogue_adds.h"
#include "ir/parser.h"

namespace kplan {
namespace {

struct Found {
  std::unique_ptr<ir::Module> module;
  passes::EpilogueFusions fusions;
  const ir::Function& fn() const { return *module->functions().front(); }
  const ir::Op* op(size_t index) const { return fn().ops().at(index); }
};

Found find(const std::string& text) {
  Found f;
  f.module = ir::parse_module(text);
  const std::map<const ir::Value*, DType> dtypes;
  const auto views = passes::compute_views(f.fn(), 4, 16, 0, &dtypes);
  passes::find_epilogue_adds(f.fn(), views, f.fusions);
  return f;
}

TEST(EpilogueAdds, AMatmulReadOnlyByAnAddTakesItsResidual) {
  const Found f = find(R"(module {
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
  ASSERT_EQ(f.fusions.producers.count(mm), 1u);
  EXPECT_EQ(f.fusions.producers.at(mm).residual, f.fn().args()[1]);
  EXPECT_EQ(f.fusions.producers.at(mm).out, add->result());
  EXPECT_EQ(f.fusions.fused_adds.at(add), mm);
  EXPECT_EQ(f.fusions.unstored.count(mm->result()), 1u);
  EXPECT_EQ(f.fusions.unstored.count(add->result()), 0u);
}

TEST(EpilogueAdds, LeavesAMatmulWithAnotherReaderAlone) {
  const Found f = find(R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 8]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = add(%h, %1) : f32[T, 8]
    output(%2) {name = "y"}
    output(%1) {name = "m"}
  }
}
)");
  EXPECT_TRUE(f.fusions.producers.empty());
  EXPECT_TRUE(f.fusions.fused_adds.empty());
  EXPECT_TRUE(f.fusions.unstored.empty());
}

TEST(EpilogueAdds, LeavesAStridedOrNarrowedResidualAlone) {
  // A slice of a wider row is no contiguous residual; an add of the matmul to itself has two reads.
  const Found strided = find(R"(module {
  func @f(%x: f32[T, 4], %h: f32[T, 16]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = slice(%h) {axis = 1, start = 0, size = 8} : f32[T, 8]
    %3 = add(%2, %1) : f32[T, 8]
    output(%3) {name = "y"}
  }
}
)");
  EXPECT_TRUE(strided.fusions.producers.empty());
  const Found twice = find(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = weight {name = "w", ckpt = "target"} : bf16[8, 4]
    %1 = matmul(%x, %0) : f32[T, 8]
    %2 = add(%1, %1) : f32[T, 8]
    output(%2) {name = "y"}
  }
}
)");
  EXPECT_TRUE(twice.fusions.producers.empty());
}

}  // namespace
}  // namespace kplan
