// DecodeStats' acceptance-length histogram (what `kplan run --stats` prints): per mode, on the toy
// target, its bins sum to the rounds and their tokens to committed_in_rounds; AR's rounds all
// commit one token; a perfect oracle's rounds commit whole blocks; and the last bin gathers the
// rounds longer than it.
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/oracle_drafter.h"
#include "runtime/ddtree/random_drafter.h"
#include "tests/unit/ddtree/toy_target.h"

namespace kplan {
namespace {

using test::ToyTarget;

constexpr int64_t kVocab = 11;
constexpr int64_t kDepth = 7;  // block size 8

using test::options_for;

int64_t rounds_in(const DecodeStats& s) {
  return std::accumulate(s.acceptance_histogram.begin(), s.acceptance_histogram.end(), int64_t{0});
}

int64_t tokens_in(const DecodeStats& s) {
  int64_t tokens = 0;
  for (size_t i = 0; i < s.acceptance_histogram.size(); ++i) tokens += static_cast<int64_t>(i + 1) * s.acceptance_histogram[i];
  return tokens;
}

std::vector<int32_t> ar_truth(ToyTarget& target, const std::vector<int32_t>& prompt, int64_t max_new,
                              DecodeResult* ar) {
  *ar = decode(target, nullptr, prompt, options_for(SpecMode::kNone, 0, max_new));
  std::vector<int32_t> truth = prompt;
  truth.insert(truth.end(), ar->tokens.begin(), ar->tokens.end());
  return truth;
}

TEST(DecodeStatsHistogram, BinsSumToTheRoundsAndTheirTokensToTheCommitted) {
  ToyTarget target(kVocab, 3);
  const std::vector<int32_t> prompt = {2, 7, 1};
  DecodeResult ar;
  const std::vector<int32_t> truth = ar_truth(target, prompt, 40, &ar);
  EXPECT_EQ(ar.stats.acceptance_histogram[0], ar.stats.rounds) << "AR: every round commits one token";
  EXPECT_EQ(rounds_in(ar.stats), ar.stats.rounds);

  OracleDrafter oracle(truth, kVocab, kDepth, 0.6, 5);
  RandomDrafter random(kVocab, kDepth, 5);
  for (Drafter* drafter : std::vector<Drafter*>{&oracle, &random})
    for (SpecMode spec : {SpecMode::kDFlash, SpecMode::kDDTree}) {
      const DecodeResult r = decode(target, drafter, prompt, options_for(spec, 6, 40));
      ASSERT_EQ(r.tokens, ar.tokens);
      EXPECT_EQ(rounds_in(r.stats), r.stats.rounds);
      EXPECT_EQ(tokens_in(r.stats), r.stats.committed_in_rounds);
      EXPECT_EQ(r.stats.committed_in_rounds, 39) << "every token but the prefill's";
    }
}

TEST(DecodeStatsHistogram, APerfectOracleCommitsWholeBlocks) {
  ToyTarget target(kVocab, 7);
  const std::vector<int32_t> prompt = {1, 2, 3};
  DecodeResult ar;
  OracleDrafter oracle(ar_truth(target, prompt, 64, &ar), kVocab, kDepth, 1.0, 3);
  const DecodeResult r = decode(target, &oracle, prompt, options_for(SpecMode::kDDTree, 16, 64));
  ASSERT_EQ(r.tokens, ar.tokens);
  // 63 tokens after the prefill's: 7 rounds of a whole block (8), then one of 7.
  std::array<int64_t, kAcceptanceBins> want{};
  want[7] = 7;
  want[6] = 1;
  EXPECT_EQ(r.stats.acceptance_histogram, want);
}

TEST(DecodeStatsHistogram, TheLastBinGathersLongerRounds) {
  DecodeStats s;
  for (int64_t committed : {int64_t{1}, int64_t{2}, int64_t{2}, kAcceptanceBins, kAcceptanceBins + 9})
    s.add_round_commit(committed);
  EXPECT_EQ(s.committed_in_rounds, 1 + 2 + 2 + 2 * kAcceptanceBins + 9);
  EXPECT_EQ(s.acceptance_histogram[0], 1);
  EXPECT_EQ(s.acceptance_histogram[1], 2);
  EXPECT_EQ(s.acceptance_histogram[kAcceptanceBins - 1], 2);
  EXPECT_EQ(rounds_in(s), 5);
}

}  // namespace
}  // namespace kplan
