// The lowered launch program of a real (synthesised) checkpoint, run by the CPU launch emulator,
// gives the CPU reference's logits and captured hidden states: prefill, a tree verify step with
// an ancestor mask over the committed cache, a KV commit of the accepted path, AR decode, and a
// short chunk padded into a larger bucket.
// This checks the lowering's strides, offsets, argument order and slot reuse without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen_test_util.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/driver/compile.h"
#include "launch_emulator.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/cpu_target.h"
#include "compiler/driver/reference_plan.h"

namespace kplan::codegen {
namespace {

using testing_util::LaunchEmulator;
using testing_util::relative_error;
using testing_util::TempDir;

class EmulatedTarget {
 public:
  EmulatedTarget(plan::LoweredPlan& lp) : lp_(lp), emu_(lp) {}

  // Runs the smallest bucket that holds the step at cache length `past`, padded as the runtime
  // pads (token 0, position 0, mask rows and columns of padding empty); returns the real rows.
  std::pair<std::vector<float>, std::vector<float>> forward(const StepInput& in, int32_t past) {
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    const plan::Bucket* bucket = nullptr;
    for (const plan::Bucket& b : lp_.buckets)
      if (b.program == "target" && b.tokens >= n && (!bucket || b.tokens < bucket->tokens)) bucket = &b;
    EXPECT_NE(bucket, nullptr);
    const int64_t t = bucket->tokens, words = (t + 31) / 32, in_words = (n + 31) / 32;
    std::vector<uint32_t> mask(t * words, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const bool visible = in.tree_mask.empty() ? j <= i : (in.tree_mask[i * in_words + j / 32] >> (j % 32)) & 1u;
        if (visible) mask[i * words + j / 32] |= 1u << (j % 32);
      }
    std::vector<int32_t> tokens = in.tokens, positions = in.positions;
    tokens.resize(t, 0);
    positions.resize(t, 0);
    emu_.write_input(plan::StepInputKind::Tokens, tokens);
    emu_.write_input(plan::StepInputKind::Positions, positions);
    emu_.write_input(plan::StepInputKind::TreeMask, mask);
    emu_.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{past});
    emu_.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(n)});
    run(*bucket);
    std::vector<float> logits, hidden;
    for (const plan::StepOutput& o : bucket->outputs) {
      if (o.kind == plan::OutputKind::TokenIds) continue;  // checked below, against the logits
      std::vector<float> rows = emu_.output(o);
      rows.resize(n * o.cols);  // drop the padding rows
      (o.kind == plan::OutputKind::Logits ? logits : hidden) = std::move(rows);
    }
    // Greedy selection on the device: next_tokens is the argmax of each real row's logits.
    for (const plan::StepOutput& o : bucket->outputs) {
      if (o.kind != plan::OutputKind::TokenIds) continue;
      const int32_t* ids = reinterpret_cast<const int32_t*>(emu_.slot(o.slot) + o.offset);
      const int64_t vocab = static_cast<int64_t>(logits.size()) / n;
      for (int64_t r = 0; r < n; ++r) EXPECT_EQ(ids[r], cpu::argmax(logits.data() + r * vocab, vocab)) << "row " << r;
    }
    return {logits, hidden};
  }

  // The commit as the plan lowers it: the @target_commit bucket, keep[] in the Tokens input and
  // its length in TokenCount, one kv_compact launch per layer.
  void commit(int32_t past, const std::vector<int32_t>& keep) {
    const plan::Bucket* bucket = nullptr;
    for (const plan::Bucket& b : lp_.buckets)
      if (b.program == "target_commit") bucket = &b;
    ASSERT_NE(bucket, nullptr);
    ASSERT_EQ(bucket->launches.size(), lp_.kv_caches.size());
    std::vector<int32_t> tokens = keep;
    tokens.resize(bucket->tokens, 0);
    emu_.write_input(plan::StepInputKind::Tokens, tokens);
    emu_.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{past});
    emu_.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(keep.size())});
    run(*bucket);
  }

 private:
  // The launch emulator, plus the families it does not emulate yet (argmax: the CPU reference's
  // op; kv_compact: the in-place row moves of ir/OPS.md), read by parameter name.
  void run(const plan::Bucket& b) {
    for (const plan::Launch& l : b.launches) {
      const KernelSource& k = lp_.kernels.at(l.kernel);
      auto arg = [&](const char* name) -> const plan::LaunchArg& {
        for (size_t i = 0; i < k.signature.size(); ++i)
          if (k.signature[i].name == name) return l.args.at(i);
        throw Error("no argument " + std::string(name) + " in " + k.id);
      };
      auto pointer = [&](const char* name) -> uint8_t* {
        const plan::LaunchArg& a = arg(name);
        if (a.kind == plan::ArgKind::StepInput) return emu_.step_input(static_cast<plan::StepInputKind>(a.index));
        EXPECT_EQ(a.kind, plan::ArgKind::Buffer) << k.id << " " << name;
        return emu_.slot(a.index) + a.offset;
      };
      if (k.family == "argmax") {
        const int64_t vocab = kernel_param(k, "V"), stride = arg("row_stride").ival;
        const float* x = reinterpret_cast<const float*>(pointer("logits"));
        int32_t* out = reinterpret_cast<int32_t*>(pointer("out_ids"));
        for (int64_t r = 0; r < arg("n_rows").ival; ++r) out[r] = static_cast<int32_t>(cpu::argmax(x + r * stride, vocab));
      } else if (k.family == "kv_compact") {
        const int64_t width = kernel_param(k, "C") + kernel_param(k, "R");
        float* cache = reinterpret_cast<float*>(pointer("cache"));
        const int32_t start = *reinterpret_cast<int32_t*>(pointer("cache_len"));
        const int32_t* keep = reinterpret_cast<int32_t*>(pointer("keep"));
        const int32_t n = *reinterpret_cast<int32_t*>(pointer("n_keep"));
        for (int32_t i = 0; i < n; ++i) std::memmove(cache + (start + i) * width, cache + (start + keep[i]) * width, width * 4);
      } else {
        emu_.run_launch(l);
      }
    }
  }

  plan::LoweredPlan& lp_;
  LaunchEmulator emu_;
};

// `preset`: `kplan synth` arguments before --seed.
void check_checkpoint(const std::string& preset) {
  TempDir dir;
  const std::filesystem::path ckpt = dir.path() / "ckpt";
  const std::string cmd = std::string(KPLAN_BINARY) + " synth " + preset + " --seed 1 --out " + ckpt.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  kplan::CompileOptions c;
  c.model = ckpt;
  c.build.capture_layers = std::vector<int64_t>{1};
  CompileResult compiled = compile_to_ir(c);
  LowerOptions o;
  o.buckets = {1, 5, 8};
  o.max_context = 64;
  const SafetensorsCheckpoint& weights = compiled.target->weights();
  plan::LoweredPlan lp = passes::lower_module(
      *compiled.module, [&](const std::string&, const std::string& name) { return weights.get(name).bytes; }, o);
  EmulatedTarget gpu_like(lp);

  cpu::CpuTarget cpu(std::make_shared<const plan::Plan>(reference_plan(ckpt)), ckpt.string(), 64);
  cpu.set_capture_layers({1});
  const int64_t vocab = cpu.config().vocab_size;

  // Prefill of 5 tokens.
  StepInput prefill{{5, 17, 3, static_cast<int32_t>(900 % vocab), 42}, {0, 1, 2, 3, 4}, {}};
  auto [logits, hidden] = gpu_like.forward(prefill, 0);
  StepOutput want = cpu.forward(prefill);
  EXPECT_LT(relative_error(logits, want.logits.data), 1e-4) << preset << " prefill";
  EXPECT_LT(relative_error(hidden, want.captured.at(0).data), 1e-4) << preset << " prefill hidden";
  const std::vector<int32_t> all = {0, 1, 2, 3, 4};
  cpu.commit(all);

  // Tree verify of 8 nodes at positions 5 + depth: parents 0 <- 1, 2; 1 <- 3, 4; 2 <- 5; 4 <- 6; 6 <- 7.
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 1, 2, 4, 6};
  StepInput tree;
  tree.tree_mask.assign(8, 0);
  for (int32_t i = 0; i < 8; ++i) {
    int32_t depth = 0;
    for (int32_t a = i; a >= 0; a = parent[a], ++depth) tree.tree_mask[i] |= 1u << a;
    tree.tokens.push_back((7 * i + 11) % static_cast<int32_t>(vocab));
    tree.positions.push_back(5 + depth - 1);
  }
  std::tie(logits, hidden) = gpu_like.forward(tree, 5);
  want = cpu.forward(tree);
  EXPECT_LT(relative_error(logits, want.logits.data), 1e-4) << preset << " tree verify";
  const std::vector<int32_t> path = {0, 1, 4, 6};
  cpu.commit(path);
  gpu_like.commit(5, path);

  // AR decode at position 9 over the compacted cache.
  StepInput ar{{23}, {9}, {}};
  std::tie(logits, hidden) = gpu_like.forward(ar, 9);
  want = cpu.forward(ar);
  EXPECT_LT(relative_error(logits, want.logits.data), 1e-4) << preset << " AR after commit";
  cpu.commit(std::vector<int32_t>{0});

  // A 3-token chunk in the 5-token bucket: the padding rows change nothing for the real ones.
  StepInput chunk{{4, 8, 15}, {10, 11, 12}, {}};
  std::tie(logits, hidden) = gpu_like.forward(chunk, 10);
  want = cpu.forward(chunk);
  EXPECT_LT(relative_error(logits, want.logits.data), 1e-4) << preset << " padded chunk";
  EXPECT_LT(relative_error(hidden, want.captured.at(0).data), 1e-4) << preset << " padded chunk hidden";
}

TEST(CodegenLowerEmulated, TinyMatchesTheCpuReference) { check_checkpoint("tiny"); }
TEST(CodegenLowerEmulated, Tiny2MatchesTheCpuReference) { check_checkpoint("tiny2"); }
// YaRN rope and group-limited routing (n_group 4, topk_group 2).
TEST(CodegenLowerEmulated, TinyYarnMatchesTheCpuReference) { check_checkpoint("tiny-yarn"); }
// Routed experts as compressed-tensors INT4, dequantised in the kernels.
TEST(CodegenLowerEmulated, TinyInt4MatchesTheCpuReference) { check_checkpoint("tiny --int4"); }

}  // namespace
}  // namespace kplan::codegen
