// The text form: print -> parse -> print is identical, and malformed text gets a located error.
#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace kplan::ir {
namespace {

// A small but complete function: every syntax feature (multi-result op, attrs of each kind,
// symbolic sums, comments, an op without operands, an op without results).
constexpr const char* kSmall = R"(module {note = "small", layers = 1} {
  func @target(%tokens: i32[T], %positions: i32[T], %tree_mask: u32[T, W], %kv.0: f32[S, 24]) {
    %0 = weight {name = "model.embed_tokens.weight", ckpt = "target"} : bf16[64, 32]
    %1 = embedding(%tokens, %0) : f32[T, 32]
    %2 = weight {name = "w.norm", ckpt = "target"} : bf16[32]
    %3 = rms_norm(%1, %2) {eps = 1e-06} : f32[T, 32]
    %4 = weight {name = "w.kva", ckpt = "target"} : bf16[24, 32]
    %5 = matmul(%3, %4) : f32[T, 24]
    %6 = slice(%5) {axis = 1, start = 16, size = 8} : f32[T, 8]
    %7 = rope(%6, %positions) {theta = 10000.0, interleaved = true, scaling = "none", attention_factor = 1.0} : f32[T, 8]
    %8 = slice(%5) {axis = 1, start = 0, size = 16} : f32[T, 16]
    %9 = concat(%8, %7) {axis = 1} : f32[T, 24]
    %10 = kv_append(%kv.0, %9) : f32[S+T, 24]
    %11 = reshape(%3) : f32[T, 2, 16]
    %12 = weight {name = "w.q", ckpt = "target"} : bf16[2, 16, 16]
    %13 = head_matmul(%11, %12) : f32[T, 2, 16]
    %14 = reshape(%5) : f32[T, 3, 8]
    %15 = slice(%14) {axis = 1, start = 0, size = 2} : f32[T, 2, 8]
    %16 = mla_attention(%13, %15, %10, %tree_mask) {scale = 0.25, kv_lora_rank = 16} : f32[T, 2, 16]
    %17 = weight {name = "w.router", ckpt = "target"} : f32[4, 32]
    %18 = matmul(%3, %17) : f32[T, 4]
    %19 = weight {name = "w.bias", ckpt = "target"} : f32[4]
    %20, %21 = moe_router(%18, %19) {top_k = 2, n_group = 2, topk_group = 1, norm_topk_prob = false, routed_scaling_factor = 1.5} : f32[T, 2], i32[T, 2]
    %22 = transpose(%12) {perm = [0, 2, 1]} : bf16[2, 16, 16]
    %23 = lm_head(%3, %0) : f32[T, 64]
    output(%23) {name = "logits"}
    output(%9) {name = "kv_step.0"}
  }
}
)";

TEST(IrText, RoundTripIsIdentical) {
  auto m = parse_module(kSmall, "small.kir");
  verify(*m);
  std::string printed = print_module(*m);
  EXPECT_EQ(printed, kSmall);
  auto again = parse_module(printed, "printed.kir");
  EXPECT_EQ(print_module(*again), printed);
}

TEST(IrText, CommentsAndNamesAreNormalised) {
  const char* text = R"(// a comment line
module {
  func @f(%x: f32[T, 4]) {   // trailing comment
    %a = add(%x, %x) : f32[T, 4]
    %b = add(%a, %x) : f32[T, 4]
    output(%b) {name = "y"}
  }
}
)";
  auto m = parse_module(text);
  verify(*m);
  EXPECT_EQ(print_module(*m),
            "module {\n  func @f(%x: f32[T, 4]) {\n    %0 = add(%x, %x) : f32[T, 4]\n"
            "    %1 = add(%0, %x) : f32[T, 4]\n    output(%1) {name = \"y\"}\n  }\n}\n");
}

TEST(IrText, WalkingAParsedFunction) {
  auto m = parse_module(kSmall);
  Function* fn = m->function("target");
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn->args().size(), 4u);
  EXPECT_EQ(fn->arg("kv.0")->type().str(), "f32[S, 24]");
  const Op* router = nullptr;
  for (const Op* op : fn->ops())
    if (op->kind() == OpKind::MoeRouter) router = op;
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->num_results(), 2u);
  EXPECT_EQ(router->result(1)->type().str(), "i32[T, 2]");
  EXPECT_EQ(router->attrs().get_int("n_group"), 2);
  EXPECT_DOUBLE_EQ(router->attrs().get_float("routed_scaling_factor"), 1.5);
  auto outs = fn->outputs();
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].first, "logits");
  EXPECT_EQ(outs[0].second->defining_op()->kind(), OpKind::LmHead);
  EXPECT_EQ(fn->output_value("kv_step.0")->type().str(), "f32[T, 24]");
  EXPECT_EQ(fn->users(fn->arg("tokens")).size(), 1u);
}

std::string parse_error(const std::string& text) {
  try {
    parse_module(text, "bad.kir");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string in_func(const std::string& body) {
  return "module {\n  func @f(%x: f32[T, 4]) {\n" + body + "\n  }\n}\n";
}

TEST(IrText, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error(in_func("    %0 = ad(%x, %x) : f32[T, 4]")),
            "bad.kir:3:10: unknown op 'ad'");
  EXPECT_EQ(parse_error(in_func("    %0 = add(%x, %y) : f32[T, 4]")),
            "bad.kir:3:18: use of undefined value %y");
  EXPECT_EQ(parse_error(in_func("    %0 = add(%x, %x) : f33[T, 4]")),
            "bad.kir:3:24: unknown dtype 'f33'");
  EXPECT_EQ(parse_error(in_func("    %0 = add(%x, %x) : f32[T*2, 4]")),
            "bad.kir:3:28: bad dim 'T*2'");
  EXPECT_EQ(parse_error(in_func("    %0 = add(%x, %x) : f32[T, 4]\n    %0 = add(%x, %x) : f32[T, 4]")),
            "bad.kir:4:5: value %0 is defined twice");
  EXPECT_EQ(parse_error(in_func("    output(%x) {name = \"y\", name = \"z\"}")),
            "bad.kir:3:29: duplicate attribute 'name'");
  EXPECT_EQ(parse_error(in_func("    output(%x) {name = \"y}")), "bad.kir:3:24: unterminated string");
  EXPECT_EQ(parse_error(in_func("    %0, %1 = add(%x, %x) : f32[T, 4]")),
            "bad.kir:3:5: 2 results named but 1 types given");
  EXPECT_EQ(parse_error("module {\n  func @f(%x: f32[4]) {\n  }\n"),
            "bad.kir:4:1: expected '}', found end of input");
  EXPECT_EQ(parse_error("modul {}"), "bad.kir:1:1: expected 'module', found 'modul'");
}

// Issue 12: a list attribute nested 200,000 deep overflowed the parser's stack (it recursed per
// '['); list elements are integers, so nesting is refused at the second '['.
TEST(IrText, ADeeplyNestedListAttributeIsRefusedNotRecursed) {
  const std::string deep = "    output(%x) {name = \"y\", perm = " + std::string(200000, '[') + "}";
  EXPECT_EQ(parse_error(in_func(deep)), "bad.kir:3:37: list attributes hold integers only");
  EXPECT_EQ(parse_error(in_func("    output(%x) {name = \"y\", perm = [1, \"a\"]}")),
            "bad.kir:3:40: list attributes hold integers only");
}

// Issue 12 (tests/fuzz/corpus/ir_parser/crashes/issue12-reshape-element-count-overflows): a type's
// element count past 2^63 overflowed int64 where reshape compares counts (UBSan, ir/type.cc) and
// the file was accepted; such a type is refused where it is written, as is a dim constant that
// overflows while it is summed.
TEST(IrText, ATypeWithMoreThan2To63ElementsIsRefused) {
  EXPECT_EQ(parse_error(in_func("    %0 = reshape(%x) : f32[4294967296, 2147483648, 2]")),
            "bad.kir:3:24: type f32[4294967296, 2147483648, 2] has more than 2^63 elements");
  EXPECT_EQ(parse_error("module {\n  func @f(%x: f32[4294967296, 4294967296]) {\n  }\n}\n"),
            "bad.kir:2:15: type f32[4294967296, 4294967296] has more than 2^63 elements");
  EXPECT_EQ(parse_error(in_func("    %0 = add(%x, %x) : f32[T+9223372036854775807+1, 4]")),
            "bad.kir:3:28: bad dim 'T+9223372036854775807+1'");
}

// Found by tests/fuzz (ir_parser; corpus/ir_parser/crashes/fuzz-negative-constant-dim): "1-2" was
// read as the dim -1, printed as "-1", and the printed module did not parse. A dim of constants
// alone must not be negative; a symbolic one keeps its offset.
TEST(IrText, ANegativeConstantDimIsRefused) {
  EXPECT_EQ(parse_error("module {\n  func @f(%x: f32[S, 1-2]) {\n  }\n}\n"), "bad.kir:2:22: bad dim '1-2'");
  EXPECT_EQ(parse_error("module {\n  func @f(%x: f32[S-1, 3-3]) {\n  }\n}\n"), "(no error)");
}

}  // namespace
}  // namespace kplan::ir
