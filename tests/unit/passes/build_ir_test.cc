// The IR builder on real configs: structure of @target / @draft, verified and round-tripped.
#include <gtest/gtest.h>

#include <cmath>

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

// print -> parse -> print is identical, before and after the pipeline.
void expect_round_trip(ir::Module& m) {
  ir::verify(m);
  std::string text = ir::print_module(m);
  auto parsed = ir::parse_module(text, "round-trip");
  ir::verify(*parsed);
  EXPECT_EQ(ir::print_module(*parsed), text);
  passes::run_pipeline(m);
  text = ir::print_module(m);
  parsed = ir::parse_module(text, "round-trip");
  ir::verify(*parsed);
  EXPECT_EQ(ir::print_module(*parsed), text);
}

TEST(BuildIr, RoundTripsEveryConfig) {
  for (const char* rel : {"configs/tiny.json", "configs/tiny2.json",
                          "configs/tiny-yarn-rope-parameters.json", "kimi-k2.6/config.json"}) {
    SCOPED_TRACE(rel);
    auto m = build_module(config(rel), nullptr);
    expect_round_trip(*m);
  }
  DraftConfig d = tiny_draft();
  auto with_draft = build_module(tiny(), &d);
  expect_round_trip(*with_draft);
  auto int4 = build_module(tiny_int4(), nullptr);
  expect_round_trip(*int4);
}

TEST(BuildIr, TinyTargetStructure) {
  auto m = build_module(tiny(), nullptr);
  ir::Function& fn = *m->function("target");
  auto n = count_ops(fn);
  EXPECT_EQ(n[OpKind::MlaAttentionExpanded], 4);
  EXPECT_EQ(n[OpKind::MoeRouter], 3);     // layer 0 is dense
  EXPECT_EQ(n[OpKind::MoeExperts], 3);
  EXPECT_EQ(n[OpKind::Swiglu], 1 + 3);    // dense MLP + shared experts
  EXPECT_EQ(n[OpKind::Rope], 8);          // q and k per layer
  EXPECT_EQ(n[OpKind::KvAppend], 4);
  EXPECT_EQ(n[OpKind::LmHead], 1);
  ASSERT_NE(fn.arg("tree_mask"), nullptr);
  EXPECT_EQ(fn.arg("tree_mask")->type().str(), "u32[T, W]");
  EXPECT_EQ(fn.arg("kv.3")->type().str(), "f32[S, 80]");
  auto outs = fn.outputs();
  ASSERT_EQ(outs.size(), 6u);  // logits + 4 kv steps + next_tokens, nothing captured without a drafter
  EXPECT_EQ(outs[0].first, "logits");
  EXPECT_EQ(outs[0].second->type().str(), "f32[T, 1024]");
  EXPECT_EQ(outs[4].first, "kv_step.3");
  EXPECT_EQ(outs[5].first, "next_tokens");  // argmax of the logits: greedy selection on the device
  EXPECT_EQ(outs[5].second->type().str(), "i32[T]");
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::MoeRouter) {
      EXPECT_EQ(op->attrs().get_int("top_k"), 2);
      EXPECT_DOUBLE_EQ(op->attrs().get_float("routed_scaling_factor"), 2.5);
      EXPECT_TRUE(op->attrs().get_bool("norm_topk_prob"));
    }
  ir::Function& commit = *m->function("target_commit");
  EXPECT_EQ(count(commit, OpKind::KvCompact), 4);
  EXPECT_EQ(commit.output_value("kv.2")->type().str(), "f32[A+S, 80]");
}

TEST(BuildIr, Tiny2HasNoQLoraAndTwoDenseLayers) {
  auto m = build_module(tiny2(), nullptr);
  ir::Function& fn = *m->function("target");
  EXPECT_EQ(count(fn, OpKind::MoeRouter), 4);
  int q_proj = 0, q_a = 0;
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::Weight) {
      const std::string& name = op->attrs().get_string("name");
      q_proj += name.find(".q_proj.weight") != std::string::npos;
      q_a += name.find(".q_a_proj") != std::string::npos;
    }
  EXPECT_EQ(q_proj, 6);
  EXPECT_EQ(q_a, 0);
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::MoeRouter) {
      EXPECT_EQ(op->attrs().get_int("top_k"), 3);
      EXPECT_FALSE(op->attrs().get_bool("norm_topk_prob"));
    }
}

TEST(BuildIr, K26StructureAndInt4Experts) {
  ModelConfig c = k26();
  auto m = build_module(c, nullptr);
  passes::run_pipeline(*m);
  ir::Function& fn = *m->function("target");
  auto n = count_ops(fn);
  EXPECT_EQ(n[OpKind::MlaAttention], 61);
  EXPECT_EQ(n[OpKind::MoeExpertsInt4], 60);
  EXPECT_EQ(n[OpKind::MoeExperts], 0);
  EXPECT_EQ(n[OpKind::MatmulInt4], 0);  // only routed experts are quantized
  for (const ir::Op* op : fn.ops()) {
    if (op->kind() == OpKind::MlaAttention) {
      EXPECT_EQ(op->attrs().get_int("kv_lora_rank"), 512);
      EXPECT_DOUBLE_EQ(op->attrs().get_float("scale"), c.softmax_scale());
      EXPECT_EQ(op->operand(1)->type().str(), "f32[T, 64, 64]");  // rope part
    }
    if (op->kind() == OpKind::MoeExpertsInt4) {
      EXPECT_EQ(op->attrs().get_int("group_size"), 32);
      EXPECT_EQ(op->operand(3)->type().str(), "i32[384, 2048, 896]");
    }
    if (op->kind() == OpKind::Rope) {
      EXPECT_EQ(op->attrs().get_string("scaling"), "yarn");
      EXPECT_DOUBLE_EQ(op->attrs().get_float("factor"), 64.0);
      EXPECT_EQ(op->attrs().get_int("original_max_position_embeddings"), 4096);
      EXPECT_DOUBLE_EQ(op->attrs().get_float("attention_factor"), 1.0);
      EXPECT_TRUE(op->attrs().get_bool("interleaved"));
    }
    if (op->kind() == OpKind::Weight)
      EXPECT_EQ(op->attrs().get_string("name").rfind("language_model.", 0), 0u);
  }
}

TEST(BuildIr, Int4ExpertsUseTheCompressedParts) {
  auto m = build_module(tiny_int4(), nullptr);
  ir::Function& fn = *m->function("target");
  EXPECT_EQ(count(fn, OpKind::MoeExpertsInt4), 3);
  EXPECT_EQ(count(fn, OpKind::MoeExperts), 0);
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::MoeExpertsInt4) {
      EXPECT_EQ(op->operand(3)->type().str(), "i32[8, 128, 32]");   // gate packed [E, I, H/8]
      EXPECT_EQ(op->operand(4)->type().str(), "bf16[8, 128, 8]");   // gate scale [E, I, H/32]
      EXPECT_EQ(op->operand(7)->type().str(), "i32[8, 256, 16]");   // down packed [E, H, I/8]
      const std::string& name = op->operand(3)->defining_op()->attrs().get_string("name");
      EXPECT_TRUE(name.ends_with(".mlp.experts.*.gate_proj.weight_packed")) << name;
    }
}

TEST(BuildIr, DrafterFunctions) {
  DraftConfig d = tiny_draft();
  auto m = build_module(tiny(), &d);
  ir::Function& target = *m->function("target");
  EXPECT_EQ(target.output_value("hidden.1")->type().str(), "f32[T, 256]");
  EXPECT_NE(target.output_value("hidden.3"), nullptr);
  EXPECT_EQ(target.output_value("hidden.0"), nullptr);

  ir::Function& ctx = *m->function("draft_context");
  EXPECT_EQ(ctx.args()[0]->name(), "hidden.1");
  EXPECT_EQ(ctx.args()[1]->name(), "hidden.3");
  EXPECT_EQ(ctx.output_value("dk.1")->type().str(), "f32[C+S, 128]");

  ir::Function& draft = *m->function("draft");
  EXPECT_EQ(draft.arg("block_tokens")->type().str(), "i32[8]");
  EXPECT_EQ(draft.output_value("logits")->type().str(), "f32[7, 1024]");
  EXPECT_EQ(count(draft, OpKind::GqaAttention), 2);
  EXPECT_EQ(count(draft, OpKind::Rope), 4);
  for (const ir::Op* op : draft.ops()) {
    if (op->kind() == OpKind::Rope) EXPECT_FALSE(op->attrs().get_bool("interleaved"));
    if (op->kind() == OpKind::GqaAttention) {
      EXPECT_DOUBLE_EQ(op->attrs().get_float("scale"), 0.125);
      EXPECT_EQ(op->operand(1)->type().str(), "f32[S+8, 2, 64]");
    }
    if (op->kind() == OpKind::Embedding || op->kind() == OpKind::LmHead)
      EXPECT_EQ(op->operand(1)->defining_op()->attrs().get_string("ckpt"), "target");
  }
}

TEST(BuildIr, OptionsCaptureLayersAndCausalMask) {
  BuildOptions opt;
  opt.capture_layers = std::vector<int64_t>{2, 0};
  opt.tree_mask = false;
  auto m = build_module(tiny(), nullptr, opt);
  ir::Function& fn = *m->function("target");
  EXPECT_EQ(fn.arg("tree_mask"), nullptr);
  auto outs = fn.outputs();
  ASSERT_EQ(outs.size(), 8u);
  EXPECT_EQ(outs[5].first, "hidden.0");
  EXPECT_EQ(outs[6].first, "hidden.2");
  EXPECT_EQ(outs[7].first, "next_tokens");
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::MlaAttentionExpanded) EXPECT_EQ(op->num_operands(), 5u);
  ir::verify(*m);

  opt.capture_layers = std::vector<int64_t>{4};
  try {
    build_module(tiny(), nullptr, opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "IR builder: capture layer 4 is not a layer of the 4-layer target");
  }
}

TEST(BuildIr, MissingTensorIsNamed) {
  ModelConfig c = tiny();
  std::vector<TensorSpec> specs = target_tensor_specs(c);
  std::erase_if(specs, [](const TensorSpec& s) {
    return s.name == "model.layers.2.self_attn.kv_a_layernorm.weight";
  });
  try {
    build_module(c, specs);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "IR builder: tensor 'model.layers.2.self_attn.kv_a_layernorm.weight' "
                           "is not in the target checkpoint's tensor list");
  }
}

TEST(BuildIr, YarnRopeAttentionFactor) {
  RopeScaling s;
  s.type = "yarn";
  s.factor = 40;
  s.original_max_position_embeddings = 4096;
  s.mscale = 1.0;
  s.mscale_all_dim = 0.0;  // absent: transformers uses get_mscale(factor)
  EXPECT_DOUBLE_EQ(rope_attrs(10000, s, true).get_float("attention_factor"),
                   0.1 * std::log(40.0) + 1.0);
  s.mscale = 0.707;
  s.mscale_all_dim = 0.707;  // equal: ratio 1
  EXPECT_DOUBLE_EQ(rope_attrs(10000, s, true).get_float("attention_factor"), 1.0);
  EXPECT_EQ(rope_attrs(5000, RopeScaling{}, false).get_string("scaling"), "none");
}

}  // namespace
}  // namespace kplan

namespace kplan {
namespace {

using ir::OpKind;
using namespace kplan::testing;

TEST(BuildIr, TiedEmbeddingsNoSharedExpertsAndMoeFrequency) {
  ModelConfig c = tiny();
  c.tie_word_embeddings = true;
  c.n_shared_experts = 0;
  c.moe_layer_freq = 2;  // MoE at layers >= 1 with layer % 2 == 0: only layer 2
  auto m = build_module(c, nullptr);
  ir::verify(*m);
  ir::Function& fn = *m->function("target");
  EXPECT_EQ(count(fn, OpKind::MoeRouter), 1);
  EXPECT_EQ(count(fn, OpKind::Swiglu), 3);  // three dense layers, no shared expert
  const ir::Op* head = fn.output_value("logits")->defining_op();
  ASSERT_EQ(head->kind(), OpKind::LmHead);
  EXPECT_EQ(head->operand(1)->defining_op()->attrs().get_string("name"),
            "model.embed_tokens.weight");
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::MoeExperts)
      // Without shared experts the routed output goes straight into the residual add.
      EXPECT_EQ(fn.users(op->result())[0]->kind(), OpKind::Add);
}

}  // namespace
}  // namespace kplan
