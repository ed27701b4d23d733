// The verifier's negative cases: each kind of bad IR gets its own diagnostic naming the
// function, the op and the values involved.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/support/error.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace kplan::ir {
namespace {

std::vector<std::string> diagnostics(const std::string& body,
                                     const std::string& args = "%x: f32[T, 4]") {
  auto m = parse_module("module {\n  func @f(" + args + ") {\n" + body + "\n  }\n}\n", "v.kir");
  return verify_diagnostics(*m);
}

std::string first(const std::vector<std::string>& d) { return d.empty() ? "(valid)" : d[0]; }

TEST(IrVerifier, AcceptsValidIr) {
  EXPECT_EQ(first(diagnostics("    %0 = add(%x, %x) : f32[T, 4]\n    output(%0) {name = \"y\"}")),
            "(valid)");
}

TEST(IrVerifier, WrongResultType) {
  EXPECT_EQ(first(diagnostics("    %0 = add(%x, %x) : f32[T, 5]")),
            "@f: %0 = add(%x, %x): result 0 has type f32[T, 5], expected f32[T, 4]");
}

TEST(IrVerifier, OperandShapeMismatchNamesTheRole) {
  EXPECT_EQ(first(diagnostics("    %0 = weight {name = \"n\", ckpt = \"target\"} : bf16[8]\n"
                              "    %1 = rms_norm(%x, %0) {eps = 1e-06} : f32[T, 4]")),
            "@f: %1 = rms_norm(%x, %0): operand 1 (w) has shape [8], expected dim 0 = 4 "
            "(last dim of x)");
}

TEST(IrVerifier, OperandCount) {
  EXPECT_EQ(first(diagnostics("    %0 = add(%x) : f32[T, 4]")),
            "@f: %0 = add(%x): has 1 operands, expected 2");
}

TEST(IrVerifier, MissingAndMistypedAttributes) {
  EXPECT_EQ(first(diagnostics("    %0 = weight {name = \"n\", ckpt = \"target\"} : bf16[4]\n"
                              "    %1 = rms_norm(%x, %0) : f32[T, 4]")),
            "@f: %1 = rms_norm(%x, %0): missing attribute 'eps'");
  EXPECT_EQ(first(diagnostics("    %0 = slice(%x) {axis = 1, start = 0.5, size = 2} : f32[T, 2]")),
            "@f: %0 = slice(%x): attribute 'start' must be an integer");
  EXPECT_EQ(first(diagnostics("    %0 = weight {name = \"n\", ckpt = \"other\"} : bf16[4]")),
            "@f: %0 = weight(): attribute 'ckpt' must be \"target\" or \"draft\", got \"other\"");
}

TEST(IrVerifier, SliceOutOfRangeAndSymbolicAxis) {
  EXPECT_EQ(first(diagnostics("    %0 = slice(%x) {axis = 1, start = 2, size = 3} : f32[T, 3]")),
            "@f: %0 = slice(%x): slice [2, 5) out of range for dim 1 of f32[T, 4]");
  EXPECT_EQ(first(diagnostics("    %0 = slice(%x) {axis = 0, start = 0, size = 1} : f32[1, 4]")),
            "@f: %0 = slice(%x): operand 0 (x) has shape [T, 4], expected a constant dim 0");
}

// Issue 12 (tests/fuzz/corpus/ir_parser/crashes/issue12-slice-bounds-overflow): start + size
// overflowed int64 (UBSan, ir/infer.cc) and the slice was accepted.
TEST(IrVerifier, ASliceWhoseEndOverflowsIsOutOfRange) {
  EXPECT_EQ(first(diagnostics("    %0 = slice(%x) {axis = 1, start = 9223372036854775807, size = 2} : f32[T, 2]")),
            "@f: %0 = slice(%x): slice [9223372036854775807, 9223372036854775807 + 2) out of range for dim 1 "
            "of f32[T, 4]");
  EXPECT_EQ(first(diagnostics("    %0 = slice(%x) {axis = 1, start = 3, size = 9223372036854775807} : f32[T, 2]")),
            "@f: %0 = slice(%x): slice [3, 3 + 9223372036854775807) out of range for dim 1 of f32[T, 4]");
}

TEST(IrVerifier, ReshapeMustKeepElementCount) {
  EXPECT_EQ(first(diagnostics("    %0 = reshape(%x) : f32[T, 2, 3]")),
            "@f: %0 = reshape(%x): cannot reshape f32[T, 4] to [T, 2, 3] (element counts differ)");
}

TEST(IrVerifier, TreeMaskMustBeU32) {
  std::string args = "%q: f32[T, 2, 16], %r: f32[T, 2, 8], %kv: f32[S+T, 24], %m: i32[T, W], %s: f32[S, 1]";
  EXPECT_EQ(first(diagnostics("    %0 = mla_attention(%q, %r, %kv, %m) {scale = 0.5, kv_lora_rank = 16} "
                              ": f32[T, 2, 16]", args)),
            "@f: %0 = mla_attention(%q, %r, %kv, %m): operand 3 (tree_mask) has type i32[T, W], "
            "expected dtype u32");
}

TEST(IrVerifier, AttentionKeysMustCoverTheStep) {
  std::string args = "%q: f32[T, 2, 16], %r: f32[T, 2, 8], %kv: f32[S, 24]";
  EXPECT_EQ(first(diagnostics("    %0 = mla_attention(%q, %r, %kv) {scale = 0.5, kv_lora_rank = 16} "
                              ": f32[T, 2, 16]", args)),
            "@f: %0 = mla_attention(%q, %r, %kv): operand 2 (kv) has S rows, expected cache "
            "rows + T (the step's entries last)");
}

TEST(IrVerifier, RouterAttributesAreChecked) {
  std::string args = "%l: f32[T, 6], %b: f32[6]";
  EXPECT_EQ(first(diagnostics("    %0, %1 = moe_router(%l, %b) {top_k = 2, n_group = 4, topk_group = 1, "
                              "norm_topk_prob = true, routed_scaling_factor = 1.0} : f32[T, 2], i32[T, 2]",
                              args)),
            "@f: %0, %1 = moe_router(%l, %b): n_group 4 does not divide 6 experts");
  EXPECT_EQ(first(diagnostics("    %0, %1 = moe_router(%l, %b) {top_k = 4, n_group = 3, topk_group = 1, "
                              "norm_topk_prob = true, routed_scaling_factor = 1.0} : f32[T, 4], i32[T, 4]",
                              args)),
            "@f: %0, %1 = moe_router(%l, %b): top_k 4 exceeds the experts of the kept groups");
}

TEST(IrVerifier, Int4WeightShapes) {
  std::string args = "%x: f32[T, 64], %p: i32[16, 8], %s: bf16[16, 3]";
  EXPECT_EQ(first(diagnostics("    %0 = matmul_int4(%x, %p, %s) {group_size = 32} : f32[T, 16]", args)),
            "@f: %0 = matmul_int4(%x, %p, %s): operand 2 (scale) has shape [16, 3], expected "
            "dim 1 = 2 (input features / group_size)");
}

TEST(IrVerifier, DuplicateOutputNames) {
  EXPECT_EQ(first(diagnostics("    output(%x) {name = \"y\"}\n    output(%x) {name = \"y\"}")),
            "@f: output(%x): duplicate output name \"y\"");
}

TEST(IrVerifier, UnboundSymbol) {
  EXPECT_EQ(first(diagnostics("    %0 = reshape(%x) : f32[T, 4]", "%x: f32[S+T, 4]")),
            "@f: argument %x has type f32[S+T, 4]: symbol S is not bound by any argument dim");
}

TEST(IrVerifier, UseBeforeDefinition) {
  Module m;
  Function& fn = *m.add_function("f");
  Value* x = fn.add_arg("x", Type{DType::F32, {Dim::sym("T"), 4}});
  Builder b(fn);
  Value* a = b.add(x, x);
  Value* c = b.add(a, x);
  // Make the first add use the second's result: a use before its definition.
  fn.ops()[0]->set_operand(1, c);
  auto d = verify_diagnostics(m);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0], "@f: %0 = add(%x, %1): operand 1 (%1) is used before its definition");
}

TEST(IrVerifier, ValueFromAnotherFunction) {
  Module m;
  Function& f = *m.add_function("f");
  Function& g = *m.add_function("g");
  Value* x = f.add_arg("x", Type{DType::F32, {4}});
  g.add_arg("y", Type{DType::F32, {4}});
  Builder(g).add(g.arg("y"), g.arg("y"));
  g.ops()[0]->set_operand(0, x);
  EXPECT_EQ(first(verify_diagnostics(m)),
            "@g: %0 = add(%x, %y): operand 0 (%x) is not defined in this function");
}

TEST(IrVerifier, VerifyThrowsWithTheFirstProblemAndACount) {
  auto m = parse_module("module {\n  func @f(%x: f32[4]) {\n    %0 = add(%x, %x) : f32[5]\n"
                        "    %1 = add(%x, %x) : f32[6]\n  }\n}\n");
  try {
    verify(*m);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "invalid IR: @f: %0 = add(%x, %x): result 0 has type f32[5], expected f32[4] "
                 "(and 1 more)");
  }
}

TEST(IrBuilder, InfersTypesAndRefusesBadOperands) {
  Module m;
  Function& fn = *m.add_function("f");
  Builder b(fn);
  Value* x = fn.add_arg("x", Type{DType::F32, {Dim::sym("T"), 64}});
  Value* w = b.weight("w", Type{DType::BF16, {32, 64}});
  EXPECT_EQ(b.matmul(x, w)->type().str(), "f32[T, 32]");
  EXPECT_EQ(b.reshape(x, {Dim::sym("T"), 4, 16})->type().str(), "f32[T, 4, 16]");
  Value* narrow = b.weight("narrow", Type{DType::BF16, {32, 63}});
  try {
    b.matmul(x, narrow);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "building matmul in @f: operand 1 (w) has shape [32, 63], expected "
                           "dim 1 = 64 (input features = last dim of x)");
  }
}

}  // namespace
}  // namespace kplan::ir
