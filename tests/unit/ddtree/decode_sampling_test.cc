// Sampling at temperature > 0 is lossless: the tokens DDTree (and DFlash) emit are distributed
// exactly as AR sampling from the target. On a toy target over a 4-token vocabulary the exact
// distribution of any n-gram of the output is computable, so each decoder's samples face a
// chi-square goodness-of-fit test against it at significance level alpha = 0.001 (fixed seeds:
// deterministic). A positive control shows the test has the power to reject a wrong
// distribution (AR samples at another temperature).
//
// Why a broken walk would fail (checked by reasoning): a walk that, say, accepts a child whenever
// the target ranks it above the sample's token, or that follows the drafter's most likely child
// when the target's sample matches no child, makes the emitted token depend on the tree — e.g.
// tokens the drafter favours come out more often than the target's softmax says — and with the
// toy-aware drafter (which puts its best guess in the tree nearly every round) the shift in the
// 3-gram frequencies is many standard errors over 20,000 runs, far past the 0.001 cut.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/random_drafter.h"
#include "tests/unit/ddtree/toy_target.h"

namespace kplan {
namespace {

using test::ToyAwareDrafter;
using test::ToyTarget;

constexpr int64_t kVocab = 4;
constexpr int64_t kNew = 6;      // tokens generated per run
constexpr int64_t kGram = 3;     // the n-gram whose distribution is tested
constexpr int kRuns = 20000;
constexpr double kAlpha = 0.001;

// Regularised upper incomplete gamma Q(a, x), by its series (x < a + 1) or continued fraction.
double upper_gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::fabs(term) > 1e-15 * std::fabs(sum); ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  // Lentz's method for the continued fraction of Q.
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

double chi_square_p_value(double statistic, int64_t df) {
  return upper_gamma_q(df / 2.0, statistic / 2.0);
}

// Exact probability of each n-gram at output offset `start` (tokens start..start+kGram-1),
// marginalising over the tokens before it: enumerate all kNew-token outputs.
std::vector<double> exact_gram_probs(const ToyTarget& toy, const std::vector<int32_t>& prompt,
                                     double temperature, int64_t start) {
  std::vector<double> probs(static_cast<size_t>(std::pow(kVocab, kGram)), 0.0);
  std::vector<int32_t> history = prompt;
  auto visit = [&](auto&& self, double p) -> void {
    const int64_t made = static_cast<int64_t>(history.size() - prompt.size());
    if (made == start + kGram) {
      int64_t cell = 0;
      for (int64_t i = start; i < start + kGram; ++i) cell = cell * kVocab + history[prompt.size() + i];
      probs[cell] += p;
      return;
    }
    const float* logits = toy.logits_after(history);
    double top = logits[0], total = 0;
    for (int64_t v = 1; v < kVocab; ++v) top = std::max<double>(top, logits[v]);
    std::vector<double> w(kVocab);
    for (int64_t v = 0; v < kVocab; ++v) total += w[v] = std::exp((logits[v] - top) / temperature);
    for (int32_t v = 0; v < kVocab; ++v) {
      history.push_back(v);
      self(self, p * w[v] / total);
      history.pop_back();
    }
  };
  visit(visit, 1.0);
  return probs;
}

// Pearson's statistic over cells, pooling cells expected below 5 counts into one.
double chi_square_p(const std::vector<int64_t>& counts, const std::vector<double>& probs, int n) {
  double statistic = 0, pooled_expected = 0;
  int64_t pooled_count = 0, cells = 0;
  for (size_t c = 0; c < probs.size(); ++c) {
    const double expected = probs[c] * n;
    if (expected < 5) {
      pooled_expected += expected;
      pooled_count += counts[c];
      continue;
    }
    statistic += (counts[c] - expected) * (counts[c] - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0) {
    statistic += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++cells;
  }
  return chi_square_p_value(statistic, cells - 1);
}

struct SampleCounts {
  std::vector<int64_t> first, last;  // n-gram counts at offsets 0 and kNew - kGram
  int64_t rounds = 0, committed = 0;
};

// `make_drafter(run)` gives a fresh drafter per run (or nullptr for AR).
// Each decoder gets its own `seed_base`: with equal seeds DDTree reproduces the AR sample
// exactly (see SameSeedGivesTheARSample), which would make the comparison vacuous.
template <typename MakeDrafter>
SampleCounts sample_many(ToyTarget& toy, const std::vector<int32_t>& prompt, DecodeOptions o,
                         uint64_t seed_base, MakeDrafter make_drafter) {
  SampleCounts s;
  s.first.assign(static_cast<size_t>(std::pow(kVocab, kGram)), 0);
  s.last = s.first;
  for (int run = 0; run < kRuns; ++run) {
    o.seed = seed_base + 1000003ull * (run + 1);
    auto drafter = make_drafter(run);
    const DecodeResult r = decode(toy, drafter.get(), prompt, o);
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(kNew));
    int64_t first = 0, last = 0;
    for (int64_t i = 0; i < kGram; ++i) {
      first = first * kVocab + r.tokens[i];
      last = last * kVocab + r.tokens[kNew - kGram + i];
    }
    ++s.first[first];
    ++s.last[last];
    s.rounds += r.stats.rounds;
    s.committed += r.stats.committed_in_rounds;
  }
  return s;
}

class DecodeSampling : public ::testing::Test {
 protected:
  ToyTarget toy{kVocab, /*seed=*/77, 4096, /*spread=*/1.5};
  std::vector<int32_t> prompt{2, 0};
  double temperature = 0.9;
  std::vector<double> first_probs = exact_gram_probs(toy, prompt, temperature, 0);
  std::vector<double> last_probs = exact_gram_probs(toy, prompt, temperature, kNew - kGram);

  DecodeOptions options(SpecMode spec, int64_t budget) const {
    DecodeOptions o;
    o.spec = spec;
    o.budget = budget;
    o.max_new = kNew;
    o.temperature = temperature;
    return o;
  }
  void expect_matches(const SampleCounts& s, const char* what) {
    const double p_first = chi_square_p(s.first, first_probs, kRuns);
    const double p_last = chi_square_p(s.last, last_probs, kRuns);
    EXPECT_GT(p_first, kAlpha) << what << ": first 3-gram";
    EXPECT_GT(p_last, kAlpha) << what << ": last 3-gram";
    std::printf("%s: p-values %.4f (tokens 1-3), %.4f (tokens 4-6), mean acceptance %.3f\n", what,
                p_first, p_last, s.rounds ? double(s.committed) / s.rounds : 0.0);
  }
};

TEST(ChiSquare, PValuesMatchTables) {
  EXPECT_NEAR(chi_square_p_value(103.442, 63), 0.001, 2e-5);
  EXPECT_NEAR(chi_square_p_value(3.841, 1), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_p_value(18.307, 10), 0.05, 1e-4);
}

TEST_F(DecodeSampling, ExactProbabilitiesSumToOne) {
  double a = 0, b = 0;
  for (double p : first_probs) a += p;
  for (double p : last_probs) b += p;
  EXPECT_NEAR(a, 1.0, 1e-12);
  EXPECT_NEAR(b, 1.0, 1e-12);
}

TEST_F(DecodeSampling, AutoregressiveMatches) {
  expect_matches(sample_many(toy, prompt, options(SpecMode::kNone, 0), 1,
                             [](int) { return std::unique_ptr<Drafter>(); }),
                 "AR");
}

TEST_F(DecodeSampling, DDTreeWithAGoodDrafterMatches) {
  const SampleCounts s = sample_many(toy, prompt, options(SpecMode::kDDTree, 6), 2, [&](int run) {
    return std::unique_ptr<Drafter>(new ToyAwareDrafter(toy, kVocab, 7, 5000 + run));
  });
  expect_matches(s, "DDTree budget 6, toy-aware drafter");
  // The trees really carry tokens: more than one token per verify on average.
  EXPECT_GT(double(s.committed) / s.rounds, 1.5);
}

TEST_F(DecodeSampling, DDTreeWithARandomDrafterMatches) {
  expect_matches(sample_many(toy, prompt, options(SpecMode::kDDTree, 20), 3, [&](int run) {
                   return std::unique_ptr<Drafter>(new RandomDrafter(kVocab, 7, 9000 + run));
                 }),
                 "DDTree budget 20, random drafter");
}

TEST_F(DecodeSampling, DFlashSinglePathMatches) {
  expect_matches(sample_many(toy, prompt, options(SpecMode::kDFlash, 0), 4, [&](int run) {
                   return std::unique_ptr<Drafter>(new ToyAwareDrafter(toy, kVocab, 7, 7000 + run));
                 }),
                 "DFlash, toy-aware drafter");
}

TEST_F(DecodeSampling, TheTestRejectsAWrongDistribution) {
  // Positive control: AR samples at temperature 0.6 tested against the 0.9 distribution.
  DecodeOptions o = options(SpecMode::kNone, 0);
  o.temperature = 0.6;
  const SampleCounts s = sample_many(toy, prompt, o, 5, [](int) { return std::unique_ptr<Drafter>(); });
  EXPECT_LT(chi_square_p(s.first, first_probs, kRuns), kAlpha);
}

TEST_F(DecodeSampling, SameSeedGivesTheARSample) {
  // The walk draws one sample per emitted token, in order, from the same stream AR uses, so with
  // one seed every speculative mode emits the very tokens AR sampling does (a coupling: stronger
  // than equal distributions, and it keeps --seed reproducible across --spec modes).
  for (uint64_t seed : {1u, 42u, 777u}) {
    DecodeOptions o = options(SpecMode::kNone, 0);
    o.seed = seed;
    o.max_new = 40;
    const std::vector<int32_t> ar = decode(toy, nullptr, prompt, o).tokens;
    ToyAwareDrafter aware(toy, kVocab, 7, seed);
    RandomDrafter random(kVocab, 7, seed);
    o.spec = SpecMode::kDDTree;
    o.budget = 6;
    EXPECT_EQ(decode(toy, &aware, prompt, o).tokens, ar);
    o.budget = 20;
    EXPECT_EQ(decode(toy, &random, prompt, o).tokens, ar);
    o.spec = SpecMode::kDFlash;
    EXPECT_EQ(decode(toy, &aware, prompt, o).tokens, ar);
  }
}

}  // namespace
}  // namespace kplan
