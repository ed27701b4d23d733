// DDTree and DFlash on the CPU reference backend (synthesised tiny and tiny2 checkpoints):
// greedy speculative output equals greedy AR output token for token, with the oracle, random
// and DFlash drafters, for budgets 1, 3, block_size - 1 and larger than the block (20).
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/oracle_drafter.h"
#include "runtime/ddtree/random_drafter.h"
#include "runtime/plan_cpu_target.h"
#include "tests/unit/ddtree/synth_checkpoints.h"

namespace kplan {
namespace {

constexpr int64_t kMaxNew = 24;

std::vector<int32_t> prompt_for(const std::string& preset) {
  return preset == "tiny" ? std::vector<int32_t>{5, 17, 42, 99, 7, 300, 12}
                          : std::vector<int32_t>{2, 811, 64, 5, 999, 123};
}

DecodeOptions greedy(SpecMode spec, int64_t budget) {
  DecodeOptions o;
  o.spec = spec;
  o.budget = budget;
  o.max_new = kMaxNew;  // no EOS: every run makes kMaxNew tokens
  return o;
}

enum class DrafterKind { kOracle, kRandom, kDFlash };

void expect_lossless(const std::string& preset, DrafterKind kind) {
  const auto& ckpt = test::synth_checkpoint(preset);
  testing_util::ReferenceModel model = testing_util::reference_model(ckpt.target, 0, ckpt.draft);
  std::unique_ptr<TargetModel>& target = model.target;
  const std::vector<int32_t> prompt = prompt_for(preset);
  const DecodeResult ar = decode(*target, nullptr, prompt, greedy(SpecMode::kNone, 0));
  ASSERT_EQ(ar.tokens.size(), static_cast<size_t>(kMaxNew));

  const int64_t vocab = target->config().vocab_size;
  const int64_t block = preset_draft_config(preset).block_size;
  std::vector<int32_t> truth = prompt;
  truth.insert(truth.end(), ar.tokens.begin(), ar.tokens.end());
  std::unique_ptr<Drafter> drafter;
  switch (kind) {
    case DrafterKind::kOracle:
      drafter = std::make_unique<OracleDrafter>(truth, vocab, block - 1, 0.7, 11);
      break;
    case DrafterKind::kRandom:
      drafter = std::make_unique<RandomDrafter>(vocab, block - 1, 11);
      break;
    case DrafterKind::kDFlash:
      drafter = std::move(model.drafter);
      break;
  }
  for (int64_t budget : {int64_t{1}, int64_t{3}, block - 1, int64_t{20}}) {
    const DecodeResult r = decode(*target, drafter.get(), prompt, greedy(SpecMode::kDDTree, budget));
    EXPECT_EQ(r.tokens, ar.tokens) << preset << " ddtree budget " << budget;
    EXPECT_EQ(r.stats.target_forwards, 1 + r.stats.rounds);
    if (kind == DrafterKind::kOracle) EXPECT_GT(r.stats.mean_acceptance_length(), 1.2);
  }
  const DecodeResult chain = decode(*target, drafter.get(), prompt, greedy(SpecMode::kDFlash, 0));
  EXPECT_EQ(chain.tokens, ar.tokens) << preset << " dflash";
}

TEST(CpuDDTree, TinyOracle) { expect_lossless("tiny", DrafterKind::kOracle); }
TEST(CpuDDTree, TinyRandom) { expect_lossless("tiny", DrafterKind::kRandom); }
TEST(CpuDDTree, TinyDFlash) { expect_lossless("tiny", DrafterKind::kDFlash); }
TEST(CpuDDTree, Tiny2Oracle) { expect_lossless("tiny2", DrafterKind::kOracle); }
TEST(CpuDDTree, Tiny2Random) { expect_lossless("tiny2", DrafterKind::kRandom); }
TEST(CpuDDTree, Tiny2DFlash) { expect_lossless("tiny2", DrafterKind::kDFlash); }

TEST(CpuDDTree, SampledSpeculativeDrawsTheARSample) {
  // At temperature > 0 the walk draws one sample per emitted token from the same stream as AR,
  // and the verify logits of an accepted node equal AR's logits at that position, so with one
  // seed DDTree emits exactly the AR sample (here with an oracle that knows it, so trees are
  // deep and accepted, and with the DFlash drafter).
  const auto& ckpt = test::synth_checkpoint("tiny");
  testing_util::ReferenceModel model = testing_util::reference_model(ckpt.target, 0, ckpt.draft);
  std::unique_ptr<TargetModel>& target = model.target;
  const std::vector<int32_t> prompt = prompt_for("tiny");
  for (uint64_t seed : {3u, 4u}) {
    DecodeOptions o = greedy(SpecMode::kNone, 0);
    o.temperature = 0.8;
    o.seed = seed;
    const DecodeResult ar = decode(*target, nullptr, prompt, o);
    std::vector<int32_t> truth = prompt;
    truth.insert(truth.end(), ar.tokens.begin(), ar.tokens.end());
    OracleDrafter oracle(truth, target->config().vocab_size, 7, 0.9, seed);
    o.spec = SpecMode::kDDTree;
    o.budget = 10;
    const DecodeResult tree = decode(*target, &oracle, prompt, o);
    EXPECT_EQ(tree.tokens, ar.tokens) << "seed " << seed;
    EXPECT_GT(tree.stats.mean_acceptance_length(), 2.0);
    std::unique_ptr<Drafter> dflash = make_plan_cpu_drafter(model.plan, ckpt.draft.string());
    EXPECT_EQ(decode(*target, dflash.get(), prompt, o).tokens, ar.tokens) << "seed " << seed;
  }
}

TEST(CpuDDTree, RefusesADrafterForAnotherTarget) {
  EXPECT_THROW(testing_util::reference_model(test::synth_checkpoint("tiny").target, 0, test::synth_checkpoint("tiny2").draft),
               Error);
}

}  // namespace
}  // namespace kplan
