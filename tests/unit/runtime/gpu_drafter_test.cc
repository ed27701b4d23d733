// The whole DDTree round on the GPU with the plan's own DFlash drafter (the bundled trained
// pair, compiled here for this GPU): greedy DDTree and chain DFlash emit AR's tokens at every
// budget up to the largest bucket's, the GPU round makes the CPU round's trees and accepted
// paths (the same rounds, tree nodes and committed tokens), and a seeded sample at temperature
// 0.7 gives the CPU's tokens; --budget auto decodes AR's tokens too. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kplan/kplan.h"
#include "tests/unit/plan/sample_plan.h"
#include "tests/unit/runtime/greedy_near_tie.h"
#include "tests/unit/runtime/session_target.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

struct Decoded {
  std::vector<int32_t> tokens;
  kplan_generate_stats stats{};
};

Decoded generate(const PlanHandle& plan, const std::vector<int32_t>& prompt, kplan_spec_mode spec, int32_t budget,
                 double temperature = 0.0, double top_p = 1.0) {
  SessionTargetModel session(plan);
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.spec = spec;
  g.budget = budget;
  g.max_new = 24;
  g.stop_at_eos = 0;
  g.temperature = temperature;
  g.top_p = top_p;
  g.seed = 3;
  Decoded d;
  d.tokens.resize(24);
  d.stats.struct_size = sizeof d.stats;
  int32_t n = 0;
  EXPECT_EQ(kplan_session_generate(session.session(), prompt.data(), static_cast<int32_t>(prompt.size()), &g,
                                   d.tokens.data(), 24, &n, &d.stats),
            KPLAN_STATUS_OK)
      << kplan_error_last();
  d.tokens.resize(static_cast<size_t>(n));
  return d;
}

// The bundled pair (models/mini-v3, with its drafter unless `draft` is false) compiled for this
// GPU with `flags` into a scratch folder; the plan's path, or empty when the compile failed (its
// log beside it, named in the failure).
fs::path compile_bundled(const std::string& folder, const std::string& arch, const std::string& flags, bool draft = true) {
  const fs::path dir = plan::testing::scratch_dir(folder);
  fs::create_directories(dir);
  const fs::path file = dir / "mini-v3.kplan";
  const std::string models = std::string(KPLAN_SOURCE_DIR) + "/models";
  const std::string cmd = std::string(KPLAN_BINARY) + " compile --model " + models + "/mini-v3" +
                          (draft ? " --draft " + models + "/mini-v3-dflash" : std::string()) + " --arch " + arch + " " +
                          flags + " -o " + file.string() + " > " + (dir / "compile.log").string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd << " failed (log: " << (dir / "compile.log").string() << ")";
    return {};
  }
  return file;
}

// The first `count` held-out prompts of the bundled pair (their first `chars` characters),
// tokenized by the plan's tokenizer.
std::vector<std::vector<int32_t>> heldout_prompts(const PlanHandle& plan, int count, size_t chars) {
  std::ifstream lines(std::string(KPLAN_TEST_DATA_DIR) + "/mini-v3/heldout_prompts.jsonl");
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < count && std::getline(lines, line)) {
    const std::string text = nlohmann::json::parse(line)["text"].get<std::string>().substr(0, chars);
    std::vector<int32_t> ids(1024);
    int32_t n = 0;
    EXPECT_EQ(kplan_tokenizer_encode(plan.get(), text.data(), text.size(), ids.data(), 1024, &n), KPLAN_STATUS_OK)
        << kplan_error_last();
    ids.resize(static_cast<size_t>(n));
    prompts.push_back(std::move(ids));
  }
  EXPECT_EQ(static_cast<int>(prompts.size()), count);
  return prompts;
}

TEST(GpuDrafter, BundledPairRoundsOnTheGpuAreTheCpuRounds) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  // All f32: the GPU's rounds are then the f32 CPU's exactly (bf16 storage: the next tests).
  const fs::path file = compile_bundled("kplan_gpu_drafter", arch, "--activations f32 --kv-cache f32");
  ASSERT_FALSE(file.empty());
  PlanHandle gpu(file.string(), KPLAN_DEVICE_GPU);
  PlanHandle cpu(file.string(), KPLAN_DEVICE_CPU);

  const std::vector<std::vector<int32_t>> prompts = heldout_prompts(gpu, 3, 300);
  for (int p = 0; p < static_cast<int>(prompts.size()); ++p) {
    const std::vector<int32_t>& prompt = prompts[static_cast<size_t>(p)];
    const Decoded ar = generate(gpu, prompt, KPLAN_SPEC_NONE, 0);
    ASSERT_EQ(ar.tokens, generate(cpu, prompt, KPLAN_SPEC_NONE, 0).tokens) << "prompt " << p;
    for (int32_t budget : {1, 4, 16, 63}) {
      const Decoded g = generate(gpu, prompt, KPLAN_SPEC_DDTREE, budget);
      const Decoded c = generate(cpu, prompt, KPLAN_SPEC_DDTREE, budget);
      EXPECT_EQ(g.tokens, ar.tokens) << "prompt " << p << " budget " << budget;
      EXPECT_EQ(g.stats.rounds, c.stats.rounds) << "prompt " << p << " budget " << budget;
      EXPECT_EQ(g.stats.tree_nodes, c.stats.tree_nodes) << "prompt " << p << " budget " << budget;
      EXPECT_EQ(g.stats.committed_in_rounds, c.stats.committed_in_rounds) << "prompt " << p << " budget " << budget;
      EXPECT_GT(g.stats.mean_acceptance_length, 1.0) << "prompt " << p << " budget " << budget;
    }
    EXPECT_EQ(generate(gpu, prompt, KPLAN_SPEC_DFLASH, 0).tokens, ar.tokens) << "prompt " << p << " chain";
    // --budget auto: each round's tree from the measured step costs; still AR's tokens.
    const Decoded automatic = generate(gpu, prompt, KPLAN_SPEC_DDTREE, KPLAN_BUDGET_AUTO);
    EXPECT_EQ(automatic.tokens, ar.tokens) << "prompt " << p << " budget auto";
    EXPECT_GT(automatic.stats.tree_nodes, automatic.stats.rounds) << "prompt " << p << " budget auto verified no tree";
    EXPECT_EQ(generate(gpu, prompt, KPLAN_SPEC_DDTREE, 16, 0.7).tokens, generate(cpu, prompt, KPLAN_SPEC_DDTREE, 16, 0.7).tokens)
        << "prompt " << p << " temperature 0.7";
  }
}

// The bundled pair compiled with `flags` on the GPU: DDTree at every budget, the chain and
// --budget auto emit the GPU's AR tokens (lossless against the GPU's own greedy decode), the
// drafter still predicts its target (mean acceptance > 1), and the GPU's AR continuation is the
// f32 CPU reference's up to a near-tie (greedy_near_tie.h).
void expect_bundled_pair_lossless(const std::string& arch, const std::string& folder, const std::string& flags) {
  const fs::path file = compile_bundled(folder, arch, flags);
  ASSERT_FALSE(file.empty());
  PlanHandle gpu(file.string(), KPLAN_DEVICE_GPU);
  cpu::CpuTarget reference(std::make_shared<const plan::Plan>(plan::read_plan(file.string(), {.verify_weights = false})),
                           file.string(), 0);
  PlanHandle cpu(file.string(), KPLAN_DEVICE_CPU);
  const std::vector<std::vector<int32_t>> prompts = heldout_prompts(gpu, 3, 300);
  for (int p = 0; p < static_cast<int>(prompts.size()); ++p) {
    const std::vector<int32_t>& prompt = prompts[static_cast<size_t>(p)];
    const Decoded ar = generate(gpu, prompt, KPLAN_SPEC_NONE, 0);
    const std::string what = "prompt " + std::to_string(p);
    testing_util::expect_greedy_up_to_a_near_tie(reference, prompt, ar.tokens, generate(cpu, prompt, KPLAN_SPEC_NONE, 0).tokens,
                                                 what + " GPU AR against the CPU's");
    for (int32_t budget : {4, 16, 63}) {
      const Decoded g = generate(gpu, prompt, KPLAN_SPEC_DDTREE, budget);
      EXPECT_EQ(g.tokens, ar.tokens) << what << " budget " << budget;
      EXPECT_GT(g.stats.mean_acceptance_length, 1.0) << what << " budget " << budget;
    }
    EXPECT_EQ(generate(gpu, prompt, KPLAN_SPEC_DFLASH, 0).tokens, ar.tokens) << what << " chain";
    EXPECT_EQ(generate(gpu, prompt, KPLAN_SPEC_DDTREE, KPLAN_BUDGET_AUTO).tokens, ar.tokens) << what << " budget auto";
  }
}

// --activations f32: bf16 KV caches only.
TEST(GpuDrafter, BundledPairWithBf16CachesIsLosslessOnTheGpu) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  expect_bundled_pair_lossless(arch, "kplan_gpu_drafter_bf16_kv", "--activations f32");
}

// The default plan: the activations the kernels write stored as bf16 too (the residual stream,
// router, logits and drafter f32).
TEST(GpuDrafter, BundledPairWithBf16ActivationsIsLosslessOnTheGpu) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  expect_bundled_pair_lossless(arch, "kplan_gpu_drafter_bf16_act", "");
}

// A round run whole on the device (one graph: draft, tree, verify, the picks, walk, commit) is
// the host-driven round: the same tokens, rounds, tree nodes and acceptance histogram, for trees
// and for the chain, greedy and sampled (temperature 0.7 and 1.5: round_sample draws the host
// sampler's draws), and with the context nearly full (the device shrinks the tree as the host
// does); --budget auto (two graphs a round: the proposal, then the chosen tree's verify) emits the
// same tokens. A sampling processor (top-p) takes the host round.
TEST(GpuDrafter, DeviceRoundsAreTheHostRounds) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  // f32 activations: AR's sampled tokens are the rounds' only where their logits agree bit for bit
  // (bf16 storage rounds AR's and the verify steps' kernels differently; near a draw's boundary
  // the sampled token differs).
  const fs::path file = compile_bundled("kplan_gpu_device_rounds", arch, "--max-context 88 --activations f32");
  ASSERT_FALSE(file.empty());
  PlanHandle gpu(file.string(), KPLAN_DEVICE_GPU);
  const std::vector<std::vector<int32_t>> prompts = heldout_prompts(gpu, 2, 600);
  for (int p = 0; p < static_cast<int>(prompts.size()); ++p) {
    // Prompts of 40 and 70 tokens: 24 new tokens fit the 88-position context after the first and
    // fill it after the second (the trees shrink to the room left, then the decode stops).
    std::vector<int32_t> prompt = prompts[static_cast<size_t>(p)];
    ASSERT_GE(prompt.size(), 70u);
    prompt.resize(p == 0 ? 40 : 70);
    for (double temperature : {0.0, 0.7, 1.5}) {
      const Decoded ar = generate(gpu, prompt, KPLAN_SPEC_NONE, 0, temperature);
      for (int32_t budget : {0, 1, 3, 7, 15, 31, 63, KPLAN_BUDGET_AUTO}) {
        const kplan_spec_mode spec = budget == 0 ? KPLAN_SPEC_DFLASH : KPLAN_SPEC_DDTREE;
        const Decoded device = generate(gpu, prompt, spec, budget, temperature);
        setenv("KPLAN_DEVICE_ROUNDS", "0", 1);
        const Decoded host = generate(gpu, prompt, spec, budget, temperature);
        unsetenv("KPLAN_DEVICE_ROUNDS");
        const std::string what = "prompt " + std::to_string(p) + " budget " + std::to_string(budget) + " temperature " +
                                 std::to_string(temperature);
        EXPECT_EQ(device.stats.device_rounds, 1) << what;
        EXPECT_EQ(host.stats.device_rounds, 0) << what;
        if (p == 0) {
          EXPECT_EQ(device.tokens, ar.tokens) << what << " (AR's tokens)";
        } else {
          EXPECT_TRUE(device.stats.stopped_at_context) << what;
        }
        EXPECT_EQ(device.tokens, host.tokens) << what;
        // --budget auto chooses from timings too (the drafter's cost per round): the same tokens,
        // rounds that may differ.
        if (budget == KPLAN_BUDGET_AUTO) {
          EXPECT_GT(device.stats.tree_nodes, device.stats.rounds) << what << " verified no tree";
          continue;
        }
        EXPECT_EQ(device.stats.rounds, host.stats.rounds) << what;
        EXPECT_EQ(device.stats.tree_nodes, host.stats.tree_nodes) << what;
        EXPECT_EQ(device.stats.stopped_at_context, host.stats.stopped_at_context) << what;
        for (int i = 0; i < KPLAN_ACCEPTANCE_BINS; ++i)
          EXPECT_EQ(device.stats.acceptance_histogram[i], host.stats.acceptance_histogram[i]) << what << " bin " << i;
      }
    }
    const Decoded truncated = generate(gpu, prompt, KPLAN_SPEC_DDTREE, 15, 0.7, 0.9);
    EXPECT_EQ(truncated.stats.device_rounds, 0) << "prompt " << p << ": top-p takes the host round";
    setenv("KPLAN_DEVICE_ROUNDS", "0", 1);
    EXPECT_EQ(truncated.tokens, generate(gpu, prompt, KPLAN_SPEC_DDTREE, 15, 0.7, 0.9).tokens) << "prompt " << p;
    unsetenv("KPLAN_DEVICE_ROUNDS");
  }
}

// --draft-context-window 16 on a 60-token prompt: @draft's attention kernels read only the last 16
// context rows. The GPU rounds (device and host-driven) are still the CPU's rounds over the same
// plan (whose IR carries the window), and greedy DDTree still decodes AR's tokens.
TEST(GpuDrafter, ContextWindowRoundsOnTheGpuAreTheCpuRounds) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  const fs::path file = compile_bundled("kplan_gpu_drafter_window", arch, "--draft-context-window 16 --activations f32 --kv-cache f32");
  ASSERT_FALSE(file.empty());
  PlanHandle gpu(file.string(), KPLAN_DEVICE_GPU);
  PlanHandle cpu(file.string(), KPLAN_DEVICE_CPU);
  const std::vector<std::vector<int32_t>> prompts = heldout_prompts(gpu, 2, 600);
  for (int p = 0; p < static_cast<int>(prompts.size()); ++p) {
    std::vector<int32_t> prompt = prompts[static_cast<size_t>(p)];
    ASSERT_GE(prompt.size(), 60u);
    prompt.resize(60);
    const Decoded ar = generate(gpu, prompt, KPLAN_SPEC_NONE, 0);
    for (int32_t budget : {0, 1, 4, 16, 63}) {
      const kplan_spec_mode spec = budget == 0 ? KPLAN_SPEC_DFLASH : KPLAN_SPEC_DDTREE;
      const std::string what = "prompt " + std::to_string(p) + " budget " + std::to_string(budget);
      const Decoded device = generate(gpu, prompt, spec, budget);
      setenv("KPLAN_DEVICE_ROUNDS", "0", 1);
      const Decoded host = generate(gpu, prompt, spec, budget);
      unsetenv("KPLAN_DEVICE_ROUNDS");
      const Decoded c = generate(cpu, prompt, spec, budget);
      EXPECT_EQ(device.tokens, ar.tokens) << what;
      EXPECT_EQ(c.tokens, ar.tokens) << what << " (CPU)";
      for (const Decoded* g : {&device, &host}) {
        const std::string which = what + (g == &device ? " device rounds" : " host rounds");
        EXPECT_EQ(g->tokens, c.tokens) << which;
        EXPECT_EQ(g->stats.rounds, c.stats.rounds) << which;
        EXPECT_EQ(g->stats.tree_nodes, c.stats.tree_nodes) << which;
        EXPECT_EQ(g->stats.committed_in_rounds, c.stats.committed_in_rounds) << which;
      }
    }
  }
}

// kplan bench's expert count: the distinct routed experts a step's tokens chose per MoE layer,
// read from the device's router outputs. One token picks exactly top-k experts in every layer;
// a longer step's first tokens choose as a shorter step's do (same cache, causal), so the
// count does not fall as the step grows, and never passes the experts there are.
TEST(GpuDrafter, BenchStepCountsTheRoutedExpertsTheTokensChose) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  const fs::path file = compile_bundled("kplan_gpu_bench_experts", arch, "--buckets 1,2,4,16,64", /*draft=*/false);
  ASSERT_FALSE(file.empty());
  PlanHandle gpu(file.string(), KPLAN_DEVICE_GPU);
  SessionTargetModel session(gpu);
  const int64_t moe_layers = gpu.spec().num_hidden_layers - gpu.spec().first_k_dense_replace;
  const int64_t experts = gpu.spec().n_routed_experts, top_k = gpu.spec().num_experts_per_tok;
  double previous = 0;
  for (int32_t tokens : {1, 2, 4, 16, 64}) {
    kplan_bench_result r{};
    ASSERT_EQ(kplan_session_bench_step(session.session(), tokens, 5, 32, &r), KPLAN_STATUS_OK) << kplan_error_last();
    EXPECT_EQ(r.moe_layers, moe_layers) << tokens;
    if (tokens == 1) {
      EXPECT_EQ(r.routed_experts_mean, static_cast<double>(top_k));
      EXPECT_EQ(r.routed_experts_max, top_k);
    }
    // (A near-tie in a router may flip once between bucket kernels: one expert of one layer.)
    EXPECT_GE(r.routed_experts_mean, previous - 1.0 / static_cast<double>(moe_layers)) << tokens;
    EXPECT_LE(r.routed_experts_max, std::min<int64_t>(experts, tokens * top_k)) << tokens;
    previous = r.routed_experts_mean;
  }
}

// The synthesised pairs (random drafters: little is accepted, the trees still must not change a
// token): tiny, tiny2 and tiny with INT4 experts, each with its `kplan synth --draft` drafter.
// f32 caches, so the CPU's decode is the GPU's token for token (with bf16 ones tiny2's routing
// flips an expert at step 13, on the H200 as in the launch emulator).
TEST(GpuDrafter, SynthPairsDecodeAsArAtEveryBudget) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  for (const std::string preset : {"tiny", "tiny2", "tiny --int4"}) {
    const fs::path dir = plan::testing::scratch_dir("kplan_gpu_drafter_synth") / std::to_string(std::hash<std::string>{}(preset));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string kplan = std::string(KPLAN_BINARY);
    const std::string log = " > " + (dir / "log").string() + " 2>&1";
    ASSERT_EQ(std::system((kplan + " synth " + preset + " --seed 1 --out " + (dir / "t").string() + " --draft " +
                           (dir / "d").string() + log).c_str()),
              0)
        << preset;
    const fs::path file = dir / "p.kplan";
    ASSERT_EQ(std::system((kplan + " compile --model " + (dir / "t").string() + " --draft " + (dir / "d").string() +
                           " --arch " + arch + " --activations f32 --kv-cache f32 -o " + file.string() + log).c_str()),
              0)
        << preset;
    PlanHandle gpu(file.string(), KPLAN_DEVICE_GPU);
    PlanHandle cpu(file.string(), KPLAN_DEVICE_CPU);
    const std::vector<int32_t> prompt = {5, 17, 300, 42, 7, 99, 3, 250, 11};
    const Decoded ar = generate(gpu, prompt, KPLAN_SPEC_NONE, 0);
    for (int32_t budget : {1, 4, 16, 63}) {
      const Decoded g = generate(gpu, prompt, KPLAN_SPEC_DDTREE, budget);
      const Decoded c = generate(cpu, prompt, KPLAN_SPEC_DDTREE, budget);
      EXPECT_EQ(g.tokens, ar.tokens) << preset << " budget " << budget;
      EXPECT_EQ(c.tokens, ar.tokens) << preset << " budget " << budget << " (CPU)";
      EXPECT_EQ(g.stats.committed_in_rounds, c.stats.committed_in_rounds) << preset << " budget " << budget;
    }
  }
}

}  // namespace
}  // namespace kplan
