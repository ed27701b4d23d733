// The drafter's lowered programs (@draft_context, @draft_commit, @draft) of the bundled trained
// pair, run by the CPU launch emulator beside the lowered target as the GPU runtime runs them,
// give the CPU drafter's proposals: after a prefill, and after a tree verify whose context K/V
// rows are all computed and then compacted to the accepted path. This checks the drafter's
// bindings (the target's captured outputs as its context features, its caches' rows, the block
// appended after the context, the candidates' topk) without a GPU, with and without a drafter
// context window, with f32 and bf16 activations.
#include <gtest/gtest.h>

#include <numeric>

#include "codegen_test_util.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/reference_plan.h"
#include "compiler/passes/lower_to_launches.h"
#include "emulated_plan.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/cpu_target.h"
#include "runtime/cpu/dflash_drafter.h"

namespace kplan::codegen {
namespace {

using testing_util::EmulatedTarget;
using testing_util::relative_error;

const std::string kModels = std::string(KPLAN_SOURCE_DIR) + "/models";

class EmulatedDrafter {
 public:
  EmulatedDrafter(EmulatedTarget& plan, int64_t block, int32_t mask) : plan_(plan), block_(block), mask_(mask) {}

  // After a target step at cache length `past` (its outputs still in the plan's buffers) and its
  // commit of `keep`: @draft_context over every row of the step, then @draft_commit.
  void observe(const StepInput& step, int32_t past, const std::vector<int32_t>& keep) {
    const plan::Bucket* b = plan_.bucket("draft_context", static_cast<int64_t>(step.tokens.size()));
    ASSERT_NE(b, nullptr);
    std::vector<int32_t> positions = step.positions;
    positions.resize(b->tokens, step.positions.back());
    auto& emu = plan_.emulator();
    emu.write_input(plan::StepInputKind::Positions, positions);
    emu.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{past});
    emu.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(step.tokens.size())});
    plan_.run(*b);
    plan_.commit(past, keep, "draft_commit");
  }

  // @draft at context length `context`; returns its outputs by kind.
  std::map<plan::OutputKind, std::vector<float>> propose(int32_t bonus, int32_t position, int32_t context) {
    const plan::Bucket* b = plan_.bucket("draft", block_);
    EXPECT_NE(b, nullptr);
    std::vector<int32_t> tokens(block_, mask_), positions(block_);
    tokens[0] = bonus;
    std::iota(positions.begin(), positions.end(), position);
    auto& emu = plan_.emulator();
    emu.write_input(plan::StepInputKind::Tokens, tokens);
    emu.write_input(plan::StepInputKind::Positions, positions);
    emu.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{context});
    emu.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(block_)});
    plan_.run(*b);
    std::map<plan::OutputKind, std::vector<float>> out;
    for (const plan::StepOutput& o : b->outputs) out[o.kind] = emu.output(o);
    return out;
  }

 private:
  EmulatedTarget& plan_;
  int64_t block_;
  int32_t mask_;
};

// The emulated proposal equals the CPU drafter's: logits, and each depth's candidates. With bf16
// activations (`bf16`) within the bf16 tolerance: logits to 1e-2, each depth's first candidate the
// CPU's, and every candidate's log-probability the CPU's for that id to 0.05 (near-ties may
// reorder the rest).
void expect_same_proposal(const std::map<plan::OutputKind, std::vector<float>>& got, cpu::CpuDFlashDrafter& cpu,
                          int32_t bonus, int32_t position, int64_t k, const std::string& what, bool bf16 = false) {
  const Matrix logits = cpu.depth_logits(bonus, position);
  EXPECT_LT(relative_error(got.at(plan::OutputKind::Logits), logits.data), bf16 ? 1e-2 : 1e-5) << what;
  const DepthCandidates want = cpu.propose_top(bonus, position, 0, k);
  if (bf16) {
    const std::vector<float>& ids = got.at(plan::OutputKind::TopIds);  // i32 bits
    const std::vector<float>& lp = got.at(plan::OutputKind::TopLogProbs);
    ASSERT_EQ(ids.size(), want.ids.size()) << what;
    for (size_t i = 0; i < ids.size(); ++i) {
      int32_t id = 0;
      std::memcpy(&id, &ids[i], 4);
      const int64_t depth = static_cast<int64_t>(i) / k;
      if (i % k == 0) {
        EXPECT_EQ(id, want.ids[i]) << what << " depth " << depth << "'s first candidate";
      }
      std::vector<float> log_p(logits.row(depth), logits.row(depth) + logits.cols);
      cpu::log_softmax_inplace(log_p.data(), logits.cols);
      ASSERT_TRUE(id >= 0 && id < logits.cols) << what << " candidate " << i;
      EXPECT_NEAR(lp[i], log_p[static_cast<size_t>(id)], 0.05) << what << " candidate " << i << " (id " << id << ")";
    }
    return;
  }
  ASSERT_EQ(want.k, k) << what;
  const std::vector<float>& ids = got.at(plan::OutputKind::TopIds);  // i32 bits
  const std::vector<float>& lp = got.at(plan::OutputKind::TopLogProbs);
  ASSERT_EQ(ids.size(), want.ids.size()) << what;
  int mismatched = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = 0;
    std::memcpy(&id, &ids[i], 4);
    mismatched += id != want.ids[i];
    EXPECT_NEAR(lp[i], want.log_probs[i], 1e-4) << what << " candidate " << i;
  }
  EXPECT_EQ(mismatched, 0) << what;
}

// `window`: --draft-context-window (0: none); the CPU drafter's plan has the same window.
// `activations`: how the lowering stores activations and the caches (dk/dv, the taps too).
void expect_bundled_drafter_matches_the_cpu_drafter(int64_t window, DType activations = DType::F32) {
  const bool bf16 = activations == DType::BF16;
  kplan::CompileOptions c;
  c.model = kModels + "/mini-v3";
  c.draft = kModels + "/mini-v3-dflash";
  c.draft_context_window = window;
  c.build.draft_top_k = 15;
  CompileResult compiled = compile_to_ir(c);
  passes::LowerOptions o;
  o.buckets = {1, 8, 16};
  o.max_context = 64;
  o.activations = activations;
  o.kv_cache = activations;  // bf16: the activations and the caches
  plan::LoweredPlan lp = passes::lower_module(*compiled.module,
                                              [&](const std::string& source, const std::string& name) {
                                                return source == "draft" ? compiled.draft->weights().get(name).bytes
                                                                         : compiled.target->weights().get(name).bytes;
                                              },
                                              o);
  EmulatedTarget gpu_like(lp);
  const DraftConfig& d = compiled.draft->config();
  EmulatedDrafter drafter(gpu_like, d.block_size, static_cast<int32_t>(d.mask_token_id));

  ReferencePlanOptions ro;
  ro.draft = kModels + "/mini-v3-dflash";
  ro.draft_context_window = window;
  auto ref = std::make_shared<const plan::Plan>(reference_plan(kModels + "/mini-v3", ro));
  cpu::CpuTarget cpu(ref, "mini-v3", 64);
  cpu::CpuDFlashDrafter cpu_drafter(ref, "mini-v3-dflash");
  cpu.set_capture_layers(cpu_drafter.capture_layers());

  // Prefill of 6 tokens; the drafter reads all of them.
  StepInput prefill{{100, 2000, 37, 512, 9, 4000}, {0, 1, 2, 3, 4, 5}, {}};
  gpu_like.forward(prefill, 0);
  const std::vector<int32_t> all = {0, 1, 2, 3, 4, 5};
  gpu_like.commit(0, all);
  drafter.observe(prefill, 0, all);
  const StepOutput cpu_prefill = cpu.forward(prefill);
  cpu.commit(all);
  cpu_drafter.observe_step(prefill, cpu_prefill, all);
  expect_same_proposal(drafter.propose(77, 6, 6), cpu_drafter, 77, 6, 15, "after prefill", bf16);

  // A tree of 8 nodes at positions 6 + depth; the drafter keeps the accepted path's rows only.
  const StepInput tree = testing_util::tree_step({-1, 0, 0, 1, 1, 2, 4, 6}, 6, 77, 13);
  gpu_like.forward(tree, 6);
  const std::vector<int32_t> path = {0, 1, 4, 6};
  gpu_like.commit(6, path);
  drafter.observe(tree, 6, path);
  const StepOutput cpu_tree = cpu.forward(tree);
  cpu.commit(path);
  cpu_drafter.observe_step(tree, cpu_tree, path);
  EXPECT_EQ(cpu_drafter.context_length(), 10);
  expect_same_proposal(drafter.propose(5, 10, 10), cpu_drafter, 5, 10, 15, "after a tree verify", bf16);
}

TEST(CodegenLowerEmulated, BundledDrafterMatchesTheCpuDrafter) { expect_bundled_drafter_matches_the_cpu_drafter(0); }
// bf16 activations: the drafter's caches, @target's captured taps it reads and its own
// activations stored as bf16 (its logits and candidates f32).
TEST(CodegenLowerEmulated, BundledDrafterWithBf16ActivationsMatchesTheCpuDrafter) {
  expect_bundled_drafter_matches_the_cpu_drafter(0, DType::BF16);
}

// --draft-context-window 4: the lowered @draft's attention launches skip the context rows before
// CacheLength - 4 (6 then 10 context positions here), as the CPU drafter's IR does.
TEST(CodegenLowerEmulated, BundledDrafterWithAContextWindowMatchesTheCpuDrafter) {
  expect_bundled_drafter_matches_the_cpu_drafter(4);
}

}  // namespace
}  // namespace kplan::codegen
