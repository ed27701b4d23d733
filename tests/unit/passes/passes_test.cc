// The pass pipeline: names, stop-after, infer-shapes' refusals, mla-absorb's rewrite and dce.
#include <gtest/gtest.h>

#include "compiler/passes/pipeline.h"
#include "ir/support/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_build_test_util.h"

namespace kplan {
namespace {

using ir::OpKind;
using namespace kplan::testing;

TEST(Passes, PipelineOrderAndLookup) {
  std::vector<std::string> names;
  for (const auto& p : passes::pipeline()) names.emplace_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"infer-shapes", "mla-absorb", "dce"}));
  try {
    passes::find_pass("mla-absorbb");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown pass 'mla-absorbb' (passes: infer-shapes, mla-absorb, dce, storage-dtypes, select-kernels, "
                           "weight-layout, plan-memory, bucketize, emit-plan, emit-round)");
  }
}

TEST(Passes, StopAfterLeavesLaterPassesUnrun) {
  auto m = build_module(tiny(), nullptr);
  passes::run_pipeline(*m, "infer-shapes");
  EXPECT_EQ(count(*m->function("target"), OpKind::MlaAttentionExpanded), 4);
  EXPECT_EQ(count(*m->function("target"), OpKind::MlaAttention), 0);
}

TEST(Passes, MlaAbsorbRewritesEveryLayer) {
  for (ModelConfig c : {tiny(), tiny2()}) {
    auto m = build_module(c, nullptr);
    passes::run_pipeline(*m);
    ir::Function& fn = *m->function("target");
    auto n = count_ops(fn);
    const int layers = static_cast<int>(c.num_hidden_layers);
    EXPECT_EQ(n[OpKind::MlaAttentionExpanded], 0);
    EXPECT_EQ(n[OpKind::MlaAttention], layers);
    EXPECT_EQ(n[OpKind::HeadMatmul], 2 * layers);
    EXPECT_EQ(n[OpKind::Transpose], layers);
    for (const ir::Op* op : fn.ops()) {
      // dce removed the expansion: no op but kv_append (and the attention reading it) touches
      // the S+T cache rows.
      for (size_t i = 0; i < op->num_results(); ++i)
        if (op->kind() != OpKind::KvAppend)
          for (const auto& d : op->result(i)->type().shape) EXPECT_TRUE(d.symbols.size() <= 1);
      if (op->kind() == OpKind::MlaAttention) {
        EXPECT_EQ(op->operand(2)->defining_op()->kind(), OpKind::KvAppend);
        EXPECT_EQ(op->attrs().get_int("kv_lora_rank"), c.kv_lora_rank);
        EXPECT_DOUBLE_EQ(op->attrs().get_float("scale"), c.softmax_scale());
        EXPECT_EQ(op->num_operands(), 4u);
      }
      if (op->kind() == OpKind::HeadMatmul && op->operand(0)->defining_op()->kind() == OpKind::MlaAttention)
        EXPECT_EQ(op->result()->type().str(),
                  "f32[T, " + std::to_string(c.num_attention_heads) + ", " +
                      std::to_string(c.v_head_dim) + "]");
    }
  }
}

TEST(Passes, MlaAbsorbSplitsKvBProjPerHead) {
  // tiny2: heads 6, nope 24, v 20, kv_lora 48 -> W3 [6, 44, 48], W_UK^T [6, 48, 24], W_UV [6, 20, 48].
  auto m = build_module(tiny2(), nullptr);
  passes::run_pipeline(*m);
  ir::Function& fn = *m->function("target");
  const ir::Op* first_q = nullptr;
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::HeadMatmul && !first_q) first_q = op;
  ASSERT_NE(first_q, nullptr);
  const ir::Op* t = first_q->operand(1)->defining_op();
  ASSERT_EQ(t->kind(), OpKind::Transpose);
  EXPECT_EQ(t->result()->type().str(), "bf16[6, 48, 24]");
  const ir::Op* w3 = t->operand(0)->defining_op()->operand(0)->defining_op();
  EXPECT_EQ(w3->kind(), OpKind::Reshape);
  EXPECT_EQ(w3->result()->type().str(), "bf16[6, 44, 48]");
  EXPECT_EQ(w3->operand(0)->defining_op()->attrs().get_string("name"),
            "model.layers.0.self_attn.kv_b_proj.weight");
  EXPECT_EQ(first_q->result()->type().str(), "f32[T, 6, 48]");
}

TEST(Passes, MlaAbsorbLeavesUnrecognisedAttentionAlone) {
  // Keys that are not a kv_b_proj expansion of the cache: nothing to absorb.
  const char* text = R"(module {
  func @f(%qn: f32[T, 2, 4], %qr: f32[T, 2, 2], %kn: f32[S+T, 2, 4], %kr: f32[S+T, 2], %v: f32[S+T, 2, 4], %s: f32[S, 1]) {
    %0 = mla_attention_expanded(%qn, %qr, %kn, %kr, %v) {scale = 0.5} : f32[T, 2, 4]
    output(%0) {name = "o"}
  }
}
)";
  auto m = ir::parse_module(text);
  passes::run_pipeline(*m);
  EXPECT_EQ(ir::print_module(*m), text);
}

TEST(Passes, InferShapesRefusesADeclaredTypeItsOperandsContradict) {
  auto m = ir::parse_module(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = add(%x, %x) : f32[T, 8]
  }
}
)");
  try {
    passes::infer_shapes(*m);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "infer-shapes: @f: %0 = add(%x, %x) : f32[T, 8]: result 0 is "
                           "declared f32[T, 8] but its operands give f32[T, 4]");
  }
}

TEST(Passes, DceKeepsOutputsAndWhatTheyUse) {
  auto m = ir::parse_module(R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = add(%x, %x) : f32[T, 4]
    %1 = add(%0, %x) : f32[T, 4]
    %2 = swiglu(%0, %0) : f32[T, 4]
    %3 = add(%2, %2) : f32[T, 4]
    output(%1) {name = "y"}
  }
}
)");
  passes::dce(*m);
  EXPECT_EQ(ir::print_module(*m), R"(module {
  func @f(%x: f32[T, 4]) {
    %0 = add(%x, %x) : f32[T, 4]
    %1 = add(%0, %x) : f32[T, 4]
    output(%1) {name = "y"}
  }
}
)");
}

}  // namespace
}  // namespace kplan
