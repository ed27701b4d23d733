// The CPU reference over a plan runs the plan's own IR with the plan's own weights: an edit of the
// IR text or of a weight's bytes is what changes the result, experts read stacked or one by one
// agree, and a plan that lacks a weight its IR names, records a layout the CPU cannot read, or
// disagrees with the IR's types is refused naming the weight.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/driver/reference_plan.h"
#include "ir/support/error.h"
#include "runtime/plan_cpu_target.h"
#include "tests/unit/cpu/cpu_test_util.h"

namespace kplan {
namespace {

using cpu_test::causal_step;
using cpu_test::synth_preset;
using testing_util::error_of;
using testing_util::expect_contains;

const std::vector<int32_t> kPrompt = {3, 14, 15, 92, 65};

std::vector<float> logits_of(const plan::Plan& p, const std::string& source = "edited plan") {
  auto model = make_plan_cpu_target(std::make_shared<const plan::Plan>(p), source, 16);
  return model->forward(causal_step(kPrompt, 0)).logits.data;
}

plan::Weight& weight_named(plan::Plan& p, const std::string& name) {
  for (plan::Weight& w : p.weights)
    if (w.name == name) return w;
  throw Error("test: no weight " + name);
}

TEST(CpuPlanTarget, RunsThePlansIrNotARebuild) {
  const plan::Plan ref = reference_plan(synth_preset("tiny").target);
  const std::vector<float> base = logits_of(ref);
  // The IR text names the embedding where it named lm_head: the CPU runs that ...
  plan::Plan tied = ref;
  const std::string from = "name = \"lm_head.weight\"", to = "name = \"model.embed_tokens.weight\"";
  const size_t at = tied.ir_text.find(from);
  ASSERT_NE(at, std::string::npos);
  tied.ir_text.replace(at, from.size(), to);
  const std::vector<float> by_ir = logits_of(tied);
  EXPECT_NE(by_ir, base);
  // ... which is what the original IR gives with lm_head's bytes replaced by the embedding's.
  plan::Plan swapped = ref;
  weight_named(swapped, "lm_head.weight").view = weight_named(swapped, "model.embed_tokens.weight").data();
  EXPECT_EQ(logits_of(swapped), by_ir);
}

TEST(CpuPlanTarget, ExpertsStackedOrOneByOneAgree) {
  for (bool int4 : {false, true}) {
    SCOPED_TRACE(int4 ? "int4" : "bf16");
    const plan::Plan ref = reference_plan(synth_preset("tiny", 1, int4).target);
    plan::Plan split = ref;
    split.weights.clear();
    int stacks = 0;
    for (const plan::Weight& w : ref.weights) {
      const size_t star = w.name.find('*');
      if (star == std::string::npos) {
        split.weights.push_back(w);
        continue;
      }
      ++stacks;
      const size_t each = w.data().size() / static_cast<size_t>(w.shape[0]);
      for (int64_t e = 0; e < w.shape[0]; ++e) {
        plan::Weight one;
        one.name = w.name.substr(0, star) + std::to_string(e) + w.name.substr(star + 1);
        one.source = w.source;
        one.dtype = w.dtype;
        one.shape.assign(w.shape.begin() + 1, w.shape.end());
        one.view = w.data().subspan(static_cast<size_t>(e) * each, each);
        split.weights.push_back(std::move(one));
      }
    }
    EXPECT_GT(stacks, 0) << "the reference plan stacks the routed experts";
    EXPECT_EQ(logits_of(split), logits_of(ref));
  }
}

TEST(CpuPlanTarget, RefusesAPlanThatLacksAWeightItsIrNames) {
  plan::Plan p = reference_plan(synth_preset("tiny").target);
  const std::string name = "model.layers.1.self_attn.q_a_proj.weight";
  std::erase_if(p.weights, [&](const plan::Weight& w) { return w.name == name; });
  expect_contains(error_of([&] { logits_of(p, "tiny.kplan"); }), {"tiny.kplan", name, "target", "no weight"});
  // A weight under the other source does not stand in for it.
  plan::Plan q = reference_plan(synth_preset("tiny").target);
  weight_named(q, name).source = "draft";
  expect_contains(error_of([&] { logits_of(q, "tiny.kplan"); }), {name, "no weight"});
  // Nor do a few experts for a stack.
  plan::Plan r = reference_plan(synth_preset("tiny").target);
  const std::string stacked = "model.layers.1.mlp.experts.*.down_proj.weight";
  std::erase_if(r.weights, [&](const plan::Weight& w) { return w.name == stacked; });
  expect_contains(error_of([&] { logits_of(r, "tiny.kplan"); }),
                  {stacked, "model.layers.1.mlp.experts.0.down_proj.weight"});
}

TEST(CpuPlanTarget, RefusesALayoutItCannotRead) {
  plan::Plan p = reference_plan(synth_preset("tiny", 1, true).target);
  const std::string name = "model.layers.1.mlp.experts.*.gate_proj.weight_packed";
  weight_named(p, name).layout = "int4_pack8_k";
  expect_contains(error_of([&] { logits_of(p, "int4.kplan"); }), {"int4.kplan", name, "layout 'int4_pack8_k'"});
}

TEST(CpuPlanTarget, RefusesAWeightThatDisagreesWithTheIr) {
  plan::Plan p = reference_plan(synth_preset("tiny").target);
  const std::string name = "model.norm.weight";
  weight_named(p, name).dtype = DType::F16;
  expect_contains(error_of([&] { logits_of(p); }), {name, "f16[256]", "bf16[256]"});
  plan::Plan q = reference_plan(synth_preset("tiny").target);
  weight_named(q, name).view = weight_named(q, name).data().first(100);
  expect_contains(error_of([&] { logits_of(q); }), {name, "holds 100 bytes"});
}

TEST(CpuPlanTarget, RefusesAPlanWithoutIr) {
  plan::Plan p = reference_plan(synth_preset("tiny").target);
  p.ir_text.clear();
  expect_contains(error_of([&] { logits_of(p, "bare.kplan"); }), {"bare.kplan", "no IR"});
  p.ir_text = "func @target(";
  expect_contains(error_of([&] { logits_of(p, "bare.kplan"); }), {"bare.kplan"});
}

TEST(CpuPlanTarget, CapturesOnlyTheLayersItsIrReturns) {
  // As `kplan compile` builds it: without a drafter, @target returns no hidden states.
  auto p = std::make_shared<const plan::Plan>(reference_plan(synth_preset("tiny").target, {.capture_all_layers = false}));
  auto model = make_plan_cpu_target(p, "tiny.kplan", 16);
  expect_contains(error_of([&] { model->set_capture_layers({1}); }), {"tiny.kplan", "layer 1", "none"});
  model->set_capture_layers({});
  EXPECT_EQ(model->forward(causal_step(kPrompt, 0)).logits.rows, 5);
}

TEST(CpuPlanTarget, ACausalPlanRefusesATreeStep) {
  auto p = std::make_shared<const plan::Plan>(reference_plan(synth_preset("tiny").target, {.tree_mask = false}));
  auto model = make_plan_cpu_target(p, "causal.kplan", 16);
  StepInput tree = causal_step({1, 2}, 0);
  tree.tree_mask = {0b01, 0b10};  // token 1 does not see token 0
  expect_contains(error_of([&] { model->forward(tree); }), {"causal.kplan", "tree step"});
  auto with_mask = testing_util::reference_target(synth_preset("tiny").target, 16);
  EXPECT_EQ(model->forward(causal_step(kPrompt, 0)).logits.data,
            with_mask->forward(causal_step(kPrompt, 0)).logits.data);
}

TEST(CpuPlanTarget, ReferencePlanIsMarkedAndCarriesEveryWeightOfEveryFunction) {
  const auto& dirs = synth_preset("tiny");
  const plan::Plan p = reference_plan(dirs.target, {.draft = dirs.draft});
  EXPECT_EQ(p.header.compiler_version, kReferencePlanCompiler);
  EXPECT_TRUE(p.header.archs.empty());
  EXPECT_TRUE(p.kernels.empty());
  ASSERT_TRUE(p.draft.has_value());
  EXPECT_FALSE(p.model_config_json.empty());
  EXPECT_FALSE(p.draft_config_json.empty());
  EXPECT_GE(p.weight_index("target", "model.embed_tokens.weight"), 0);
  EXPECT_GE(p.weight_index("draft", "fc.weight"), 0);
  EXPECT_GE(p.weight_index("target", "model.layers.1.mlp.experts.*.up_proj.weight"), 0);
}

}  // namespace
}  // namespace kplan
