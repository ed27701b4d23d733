// The lowering stages one by one: each records its own part of the LowerState, the stages run
// from shapes alone (no weight bytes), the weights table carries every function's weights by
// source, the in-place aliases are checked, and lowering is deterministic.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "compiler/codegen/families/family.h"
#include "compiler/driver/compile.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/passes/lowered_printer.h"
#include "compiler/passes/pipeline.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

std::unique_ptr<ir::Module> config_ir(const std::string& name, const std::optional<std::string>& draft = std::nullopt) {
  kplan::CompileOptions c;
  c.model = std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + name + ".json";
  if (draft) c.draft = std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + *draft + ".json";
  c.load_weights = false;
  return compile_to_ir(c).module;
}

LowerOptions options() {
  LowerOptions o;
  o.buckets = {1, 4};
  o.max_context = 64;
  return o;
}

TEST(LoweringStages, EachStageRecordsItsOwnPart) {
  auto m = config_ir("tiny");
  LowerState s = lowering_state(*m, nullptr, options());
  run_lowering(s, "select-kernels");
  EXPECT_FALSE(s.kernels.empty());
  EXPECT_TRUE(s.weights.empty());
  EXPECT_TRUE(s.buffers.slots.empty());
  run_lowering(s, "weight-layout");  // re-runs the stages up to weight-layout
  EXPECT_FALSE(s.weights.empty());
  EXPECT_TRUE(s.storage.empty());
  run_lowering(s, "plan-memory");
  EXPECT_EQ(s.kv_caches.size(), 4u);
  EXPECT_EQ(s.aliases.size(), 8u);  // 4 kv_append in @target, 4 kv_compact in @target_commit
  EXPECT_TRUE(s.buckets.empty());
  run_lowering(s, "bucketize");
  ASSERT_EQ(s.buckets.size(), 3u);
  EXPECT_EQ(s.buckets[2].program->name(), "target_commit");
  EXPECT_FALSE(s.lowered);
  run_lowering(s);
  ASSERT_TRUE(s.lowered);
  EXPECT_EQ(s.lowered->buckets.size(), 3u);
  // The dump after each stage says which stage it is.
  EXPECT_EQ(print_lowered(s, "emit-plan").rfind("// lowered after emit-plan: arch sm_90", 0), 0u);
}

TEST(LoweringStages, ShapesAloneGiveWeightEntriesWithoutBytes) {
  auto m = config_ir("tiny");
  const plan::LoweredPlan lp = lower_module(*m, nullptr, options());
  ASSERT_FALSE(lp.weights.empty());
  for (const plan::Weight& w : lp.weights) {
    EXPECT_TRUE(w.data().empty()) << w.name;
    EXPECT_GT(w.size, 0u) << w.name;
    EXPECT_EQ(w.source, "target");
  }
}

TEST(LoweringStages, WeightsOfEveryFunctionBySource) {
  auto m = config_ir("tiny", "draft-tiny");
  ASSERT_NE(m->function("draft"), nullptr);
  const plan::LoweredPlan lp = lower_module(*m, nullptr, options());
  // Every weight op of every function has its (source, name) entry, exactly once.
  std::set<std::pair<std::string, std::string>> want, have;
  for (const ir::Function* fn : m->functions())
    for (const ir::Op* op : fn->ops())
      if (op->kind() == ir::OpKind::Weight || op->kind() == ir::OpKind::WeightStack)
        want.insert({op->attrs().get_string("ckpt"), op->attrs().get_string("name")});
  for (const plan::Weight& w : lp.weights) EXPECT_TRUE(have.insert({w.source, w.name}).second) << w.name;
  EXPECT_EQ(have, want);
  int draft = 0;
  for (const plan::Weight& w : lp.weights) draft += w.source == "draft";
  EXPECT_GT(draft, 0);
}

TEST(LoweringStages, InPlaceAliasesAreVerified) {
  auto m = config_ir("tiny");
  LowerState s = lowering_state(*m, nullptr, options());
  run_lowering(s, "plan-memory");
  EXPECT_NO_THROW(verify_memory(s));
  // An alias onto a value that is not a KV cache argument is refused.
  const ir::Function* target = m->function("target");
  const ir::Value* some_result = nullptr;
  for (const ir::Op* op : target->ops())
    if (op->kind() == ir::OpKind::RmsNorm && !some_result) some_result = op->result();
  LowerState bad = s;
  bad.aliases.begin()->second = some_result;
  try {
    verify_memory(bad);
    FAIL() << "alias onto a scratch value accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a KV cache argument"), std::string::npos) << e.what();
  }
  // An alias stored apart from its cache is refused.
  LowerState apart = s;
  apart.storage[apart.aliases.begin()->first] = {Storage::Kind::Slot, 0};
  EXPECT_THROW(verify_memory(apart), Error);
}

TEST(LoweringStages, DeterministicAndStageNamesKnown) {
  auto m = config_ir("tiny2");
  LowerState a = lowering_state(*m, nullptr, options());
  LowerState b = lowering_state(*m, nullptr, options());
  run_lowering(a);
  run_lowering(b);
  EXPECT_EQ(print_lowered(a, "emit-plan"), print_lowered(b, "emit-plan"));
  EXPECT_EQ(a.lowered->buckets, b.lowered->buckets);
  std::vector<std::string> names;
  for (const LoweringStage& st : lowering_stages()) names.emplace_back(st.name);
  EXPECT_EQ(names, (std::vector<std::string>{"storage-dtypes", "select-kernels", "weight-layout", "plan-memory", "bucketize", "emit-plan", "emit-round"}));
  EXPECT_TRUE(is_lowering_stage("plan-memory"));
  EXPECT_FALSE(is_lowering_stage("dce"));
}

// The L2 prefetch of a matmul's weights before its grid waits (heuristics'
// weight_prefetch_after_light_kib): a matmul whose launch follows one reading at most 16 MiB of
// weights (a norm, rope-append, attention, a per-head matmul) asks for its weight's first 12 MiB
// (whole heads where they fit), one after a weight stream asks for none; KPLAN_PREFETCH_AFTER_LIGHT=0
// turns it off. On K2.6's layers (3: the dense one and two MoE), the instances' PREFETCH by shape.
TEST(LoweringStages, MatmulsAfterLightLaunchesPrefetchTheirWeights) {
  auto prefetch = [] {
    kplan::CompileOptions c;
    c.model = std::string(KPLAN_TEST_DATA_DIR) + "/kimi-k2.6/config.json";
    c.load_weights = false;
    c.layers = 3;
    auto m = compile_to_ir(c).module;
    LowerOptions o = options();
    o.buckets = {1};
    LowerState s = lowering_state(*m, nullptr, o);
    run_lowering(s, "select-kernels");
    std::map<std::string, int64_t> by_shape;  // "k<K>_n<N>_wl<L>_acc<A>_rt<R>" of each matmul instance
    for (const auto& [op, kernels] : s.kernels)
      for (const codegen::KernelSource& k : kernels)
        if (k.family == "matmul")
          by_shape["k" + std::to_string(codegen::kernel_param(k, "K")) + "_n" + std::to_string(codegen::kernel_param(k, "N")) + "_acc" +
                   std::to_string(codegen::kernel_param(k, "ACC")) + "_rt" + std::to_string(codegen::kernel_param(k, "ROUTED"))] =
              codegen::kernel_param(k, "PREFETCH");
        else if (k.family == "uk_rope_append")  // W_UK with the rope-append's blocks (uk_rope_append.h)
          by_shape["uk_k" + std::to_string(codegen::kernel_param(k, "K")) + "_n" + std::to_string(codegen::kernel_param(k, "N"))] =
              codegen::kernel_param(k, "PREFETCH");
    return by_shape;
  };
  const std::map<std::string, int64_t> on = prefetch();
  EXPECT_EQ(on.at("k1536_n12288_acc0_rt0"), 12288) << "q_b after q_a's norm: its first 12 MiB";
  EXPECT_EQ(on.at("uk_k128_n512"), 0) << "W_UK with the rope-append, after q_b's 36 MiB";
  EXPECT_EQ(on.at("k512_n128_acc0_rt0"), 128) << "W_UV after the attention: each head's 128 KiB";
  EXPECT_EQ(on.at("k8192_n7168_acc1_rt0"), 12288) << "o_proj after W_UV (8 MiB: a light launch)";
  EXPECT_EQ(on.at("k7168_n163840_acc0_rt0"), 12288) << "lm_head after the final norm";
  EXPECT_EQ(on.at("k18432_n7168_acc1_rt0"), 0) << "the dense down after its gate/up siblings' 504 MiB";
  EXPECT_EQ(on.at("k2048_n7168_acc1_rt8"), 0) << "the shared down after the routed experts";
  setenv("KPLAN_PREFETCH_AFTER_LIGHT", "0", 1);
  const std::map<std::string, int64_t> off = prefetch();
  unsetenv("KPLAN_PREFETCH_AFTER_LIGHT");
  for (const auto& [shape, kib] : off) EXPECT_EQ(kib, 0) << shape;
  EXPECT_EQ(off.size(), on.size());
  setenv("KPLAN_FUSE_UK_APPEND", "0", 1);
  const std::map<std::string, int64_t> own = prefetch();
  unsetenv("KPLAN_FUSE_UK_APPEND");
  EXPECT_EQ(own.at("k128_n512_acc0_rt0"), 8192) << "W_UK after the rope-append's own launch: all 64 heads' [128, 512]";
}

TEST(LoweringStages, ErrorsNameTheStage) {
  auto m = config_ir("tiny");
  LowerOptions o = options();
  o.arch = "hopper";
  try {
    lower_module(*m, nullptr, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lowering stage select-kernels: codegen: no tuning for arch 'hopper'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kplan::passes
