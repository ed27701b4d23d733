// The decode loops on the toy target: greedy DFlash and DDTree give exactly the greedy AR tokens
// for every drafter and budget, commit a consistent history, feed the drafter the committed
// tokens, stop at max_new / EOS / a full context, and refuse bad input.
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/oracle_drafter.h"
#include "runtime/ddtree/random_drafter.h"
#include "tests/unit/ddtree/toy_target.h"

namespace kplan {
namespace {

using test::RecordingDrafter;
using test::ToyAwareDrafter;
using test::ToyTarget;

constexpr int64_t kVocab = 11;
constexpr int64_t kDepth = 7;  // block size 8

using test::options_for;

void expect_consistent_history(const ToyTarget& target, const RecordingDrafter& drafter,
                               const std::vector<int32_t>& prompt, const DecodeResult& r) {
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), r.tokens.begin(), r.tokens.end());
  const std::vector<int32_t>& committed = target.committed();
  // Everything emitted except the last bonus token is committed (a round may commit a few
  // accepted tokens past an EOS / max_new cut; those are not emitted).
  ASSERT_GE(committed.size() + 1, full.size());
  for (size_t i = 0; i + 1 < full.size(); ++i) ASSERT_EQ(committed[i], full[i]) << "at " << i;
  EXPECT_EQ(drafter.observed, committed);
  EXPECT_EQ(target.forwards, r.stats.target_forwards);
}

TEST(DecodeToy, GreedySpeculativeEqualsGreedyAR) {
  int runs = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    ToyTarget target(kVocab, seed);
    const std::vector<int32_t> prompt = {static_cast<int32_t>(seed % kVocab), 4, 9};
    const DecodeResult ar = decode(target, nullptr, prompt, options_for(SpecMode::kNone, 0, 60));
    ASSERT_EQ(ar.tokens.size(), 60u);
    EXPECT_EQ(ar.stats.target_forwards, 60);

    std::vector<int32_t> truth = prompt;
    truth.insert(truth.end(), ar.tokens.begin(), ar.tokens.end());
    OracleDrafter oracle_high(truth, kVocab, kDepth, 0.9, seed);
    OracleDrafter oracle_low(truth, kVocab, kDepth, 0.4, seed);
    RandomDrafter random(kVocab, kDepth, seed);
    ToyAwareDrafter aware(target, kVocab, kDepth, seed);
    for (Drafter* inner : std::vector<Drafter*>{&oracle_high, &oracle_low, &random, &aware}) {
      RecordingDrafter drafter(*inner);
      for (int64_t budget : {1, 3, 7, 20}) {
        target.forwards = 0;
        target.max_step_tokens = 0;
        const DecodeResult r =
            decode(target, &drafter, prompt, options_for(SpecMode::kDDTree, budget, 60));
        ASSERT_EQ(r.tokens, ar.tokens) << "seed " << seed << " budget " << budget;
        expect_consistent_history(target, drafter, prompt, r);
        EXPECT_LE(target.max_step_tokens, std::max<int64_t>(1 + budget, 3));
        ++runs;
      }
      target.forwards = 0;
      const DecodeResult chain = decode(target, &drafter, prompt, options_for(SpecMode::kDFlash, 0, 60));
      ASSERT_EQ(chain.tokens, ar.tokens) << "dflash, seed " << seed;
      expect_consistent_history(target, drafter, prompt, chain);
      ++runs;
    }
  }
  EXPECT_EQ(runs, 4 * 4 * 5);
}

TEST(DecodeToy, PerfectOracleAcceptsWholeBlocks) {
  ToyTarget target(kVocab, 7);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const DecodeResult ar = decode(target, nullptr, prompt, options_for(SpecMode::kNone, 0, 64));
  std::vector<int32_t> truth = prompt;
  truth.insert(truth.end(), ar.tokens.begin(), ar.tokens.end());
  OracleDrafter oracle(truth, kVocab, kDepth, 1.0, 3);
  const DecodeResult r = decode(target, &oracle, prompt, options_for(SpecMode::kDDTree, 16, 64));
  ASSERT_EQ(r.tokens, ar.tokens);
  // 63 tokens after the prefill's first one, 8 per round: 8 rounds, the last one short.
  EXPECT_EQ(r.stats.rounds, 8);
  EXPECT_NEAR(r.stats.mean_acceptance_length(), 63.0 / 8.0, 1e-9);
  EXPECT_EQ(r.stats.ar_forwards() - r.stats.target_forwards, 64 - 9);
}

TEST(DecodeToy, StopsAtEosAndKeepsIt) {
  ToyTarget target(kVocab, 5);
  const std::vector<int32_t> prompt = {0, 1};
  const DecodeResult ar = decode(target, nullptr, prompt, options_for(SpecMode::kNone, 0, 40));
  const int32_t eos = ar.tokens[12];
  const size_t first = std::find(ar.tokens.begin(), ar.tokens.end(), eos) - ar.tokens.begin();
  DecodeOptions o = options_for(SpecMode::kNone, 0, 40);
  o.eos_ids = {eos};
  const DecodeResult ar_eos = decode(target, nullptr, prompt, o);
  ASSERT_EQ(ar_eos.tokens.size(), first + 1);
  EXPECT_EQ(ar_eos.tokens.back(), eos);

  RandomDrafter random(kVocab, kDepth, 9);
  o.spec = SpecMode::kDDTree;
  o.budget = 12;
  EXPECT_EQ(decode(target, &random, prompt, o).tokens, ar_eos.tokens);
}

TEST(DecodeToy, StopsWhenTheContextIsFull) {
  ToyTarget target(kVocab, 6, /*max_context=*/20);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  const DecodeResult ar = decode(target, nullptr, prompt, options_for(SpecMode::kNone, 0, 100));
  // 15 free slots: 15 decode steps commit 15 tokens, plus the last token picked after them.
  EXPECT_EQ(ar.tokens.size(), 16u);
  EXPECT_TRUE(ar.stats.stopped_at_context);
  RandomDrafter random(kVocab, kDepth, 2);
  ToyAwareDrafter aware(target, kVocab, kDepth, 2);
  for (Drafter* d : std::vector<Drafter*>{&random, &aware}) {
    const DecodeResult r = decode(target, d, prompt, options_for(SpecMode::kDDTree, 20, 100));
    EXPECT_EQ(r.tokens, ar.tokens);
    EXPECT_TRUE(r.stats.stopped_at_context);
  }
}

TEST(DecodeToy, RefusesBadInput) {
  ToyTarget target(kVocab, 1, /*max_context=*/8);
  RandomDrafter random(kVocab, kDepth, 1);
  const std::vector<int32_t> ok = {1, 2};
  EXPECT_THROW(decode(target, nullptr, std::vector<int32_t>{}, options_for(SpecMode::kNone, 0, 4)), Error);
  EXPECT_THROW(decode(target, nullptr, std::vector<int32_t>{1, kVocab}, options_for(SpecMode::kNone, 0, 4)), Error);
  EXPECT_THROW(decode(target, nullptr, std::vector<int32_t>{1, -1}, options_for(SpecMode::kNone, 0, 4)), Error);
  EXPECT_THROW(decode(target, nullptr, std::vector<int32_t>(9, 1), options_for(SpecMode::kNone, 0, 4)), Error);
  EXPECT_THROW(decode(target, &random, ok, options_for(SpecMode::kDDTree, 0, 4)), Error);
  EXPECT_THROW(decode(target, nullptr, ok, options_for(SpecMode::kDDTree, 4, 4)), Error);
  EXPECT_THROW(decode(target, nullptr, ok, options_for(SpecMode::kDFlash, 0, 4)), Error);
  EXPECT_THROW(decode(target, nullptr, ok, options_for(SpecMode::kNone, 0, 0)), Error);
  EXPECT_NO_THROW(decode(target, nullptr, std::vector<int32_t>(8, 1), options_for(SpecMode::kNone, 0, 4)));
  try {
    decode(target, nullptr, std::vector<int32_t>(9, 1), options_for(SpecMode::kNone, 0, 4));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the context"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kplan
