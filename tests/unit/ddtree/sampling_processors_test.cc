// The sampling processors (runtime/ddtree/logits_processor.h) — top-k, top-p, min-p, repetition,
// frequency and presence penalties — and their losslessness under DDTree and DFlash: for each
// processor (and all together), AR and DDTree samples on the toy target face a chi-square test
// against the exact processed distribution of a 3-gram of the output, computed here by an
// independent dense implementation over every possible history (as decode_sampling_test.cc does
// for plain temperature sampling); with one seed DDTree and DFlash emit AR's very tokens; and each
// processor's semantics is checked on hand-made logits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/logits_processor.h"
#include "runtime/ddtree/token_sampler.h"
#include "tests/unit/ddtree/toy_target.h"

namespace kplan {
namespace {

using test::ToyAwareDrafter;
using test::ToyTarget;

constexpr int64_t kVocab = 4;
constexpr int64_t kNew = 6;
constexpr int64_t kGram = 3;
// KPLAN_SAMPLING_RUNS=200000 runs ten times as many (a sharper check, ~15 s).
const int kRuns = std::getenv("KPLAN_SAMPLING_RUNS") ? std::atoi(std::getenv("KPLAN_SAMPLING_RUNS")) : 20000;
constexpr double kAlpha = 0.001;
constexpr double kTemperature = 0.9;

// ---- the reference: the processed distribution, written out densely ----

std::vector<double> reference_probs(const float* raw, const std::vector<int32_t>& prompt,
                                    const std::vector<int32_t>& output, const SamplingOptions& o) {
  std::vector<double> l(raw, raw + kVocab);
  for (int32_t v = 0; v < kVocab; ++v) {
    const bool in_prompt = std::count(prompt.begin(), prompt.end(), v) > 0;
    const auto count = std::count(output.begin(), output.end(), v);
    // The runtime works in float: round as it does, so exact ties stay ties.
    float x = static_cast<float>(l[v]);
    if ((in_prompt || count > 0) && o.repetition_penalty != 1.0) {
      const auto r = static_cast<float>(o.repetition_penalty);
      x = x > 0 ? x / r : x * r;
    }
    x -= static_cast<float>(o.frequency_penalty * static_cast<double>(count) + (count > 0 ? o.presence_penalty : 0.0));
    l[v] = x;
  }
  const double top = *std::max_element(l.begin(), l.end());
  std::vector<double> w(kVocab);
  for (int v = 0; v < kVocab; ++v) w[v] = std::exp((l[v] - top) / kTemperature);
  std::vector<int> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
  std::vector<bool> keep(kVocab, true);
  if (o.top_k > 0)
    for (int i = static_cast<int>(o.top_k); i < kVocab; ++i) keep[order[i]] = false;
  if (o.top_p < 1.0) {
    double total = 0, mass = 0;
    for (int v = 0; v < kVocab; ++v) total += keep[v] ? w[v] : 0;
    bool reached = false;
    for (int i = 0; i < kVocab; ++i) {
      if (!keep[order[i]]) continue;
      if (reached) keep[order[i]] = false;
      mass += w[order[i]];
      if (mass >= o.top_p * total) reached = true;
    }
  }
  if (o.min_p > 0)
    for (int v = 0; v < kVocab; ++v)
      if (w[v] < o.min_p * w[order[0]]) keep[v] = false;
  double total = 0;
  for (int v = 0; v < kVocab; ++v) total += keep[v] ? w[v] : 0;
  std::vector<double> p(kVocab);
  for (int v = 0; v < kVocab; ++v) p[v] = keep[v] ? w[v] / total : 0;
  return p;
}

std::vector<double> exact_gram_probs(const ToyTarget& toy, const std::vector<int32_t>& prompt,
                                     const SamplingOptions& o, int64_t start) {
  std::vector<double> probs(static_cast<size_t>(std::pow(kVocab, kGram)), 0.0);
  std::vector<int32_t> history = prompt, output;
  auto visit = [&](auto&& self, double p) -> void {
    const auto made = static_cast<int64_t>(output.size());
    if (made == start + kGram) {
      int64_t cell = 0;
      for (int64_t i = start; i < start + kGram; ++i) cell = cell * kVocab + output[i];
      probs[cell] += p;
      return;
    }
    const std::vector<double> q = reference_probs(toy.logits_after(history), prompt, output, o);
    for (int32_t v = 0; v < kVocab; ++v) {
      if (q[v] == 0) continue;
      history.push_back(v);
      output.push_back(v);
      self(self, p * q[v]);
      history.pop_back();
      output.pop_back();
    }
  };
  visit(visit, 1.0);
  return probs;
}

// ---- chi-square (Pearson, cells expected below 5 pooled), as decode_sampling_test.cc ----

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
  } else if (pooled_count > 0) {
    return 0.0;  // tokens the processed distribution forbids
  }
  return upper_gamma_q((cells - 1) / 2.0, statistic / 2.0);
}

struct Processor {
  std::string name;
  SamplingOptions options;
};

std::vector<Processor> processors() {
  std::vector<Processor> p(7);
  p[0].name = "top-k 2";
  p[0].options.top_k = 2;
  p[1].name = "top-p 0.7";
  p[1].options.top_p = 0.7;
  p[2].name = "min-p 0.4";
  p[2].options.min_p = 0.4;
  p[3].name = "repetition penalty 2";
  p[3].options.repetition_penalty = 2.0;
  p[4].name = "frequency penalty 0.8";
  p[4].options.frequency_penalty = 0.8;
  p[5].name = "presence penalty 1.2";
  p[5].options.presence_penalty = 1.2;
  p[6].name = "all together";
  p[6].options = {3, 0.9, 0.1, 1.5, 0.3, 0.4};
  return p;
}

class SamplingProcessors : public ::testing::TestWithParam<int> {
 protected:
  ToyTarget toy{kVocab, /*seed=*/77, 4096, /*spread=*/1.5};
  std::vector<int32_t> prompt{2, 0};
  Processor processor = processors()[static_cast<size_t>(GetParam())];

  DecodeOptions options(SpecMode spec, int64_t budget) const {
    DecodeOptions o;
    o.spec = spec;
    o.budget = budget;
    o.max_new = kNew;
    o.temperature = kTemperature;
    o.sampling = processor.options;
    return o;
  }
  // AR, or DDTree (budget 6) with the toy-aware drafter.
  void expect_matches(bool tree, uint64_t seed_base) {
    std::vector<int64_t> first(static_cast<size_t>(std::pow(kVocab, kGram)), 0), last = first;
    DecodeOptions o = options(tree ? SpecMode::kDDTree : SpecMode::kNone, 6);
    int64_t rounds = 0, committed = 0;
    for (int run = 0; run < kRuns; ++run) {
      o.seed = seed_base + 1000003ull * (run + 1);
      ToyAwareDrafter drafter(toy, kVocab, 7, 5000 + run);
      const DecodeResult r = decode(toy, tree ? &drafter : nullptr, prompt, o);
      ASSERT_EQ(r.tokens.size(), static_cast<size_t>(kNew));
      int64_t a = 0, b = 0;
      for (int64_t i = 0; i < kGram; ++i) {
        a = a * kVocab + r.tokens[i];
        b = b * kVocab + r.tokens[kNew - kGram + i];
      }
      ++first[a];
      ++last[b];
      rounds += r.stats.rounds;
      committed += r.stats.committed_in_rounds;
    }
    const double p_first = chi_square_p(first, exact_gram_probs(toy, prompt, processor.options, 0), kRuns);
    const double p_last = chi_square_p(last, exact_gram_probs(toy, prompt, processor.options, kNew - kGram), kRuns);
    const std::string what = (tree ? "DDTree budget 6, " : "AR, ") + processor.name;
    EXPECT_GT(p_first, kAlpha) << what << ": first 3-gram";
    EXPECT_GT(p_last, kAlpha) << what << ": last 3-gram";
    if (tree) EXPECT_GT(double(committed) / rounds, 1.3) << what << ": the trees carry tokens";
    std::printf("%s: p-values %.4f, %.4f; mean acceptance %.3f\n", what.c_str(), p_first, p_last,
                rounds ? double(committed) / rounds : 0.0);
  }
};

TEST_P(SamplingProcessors, ARMatchesTheProcessedDistribution) { expect_matches(false, 11); }

// Its own seeds: with AR's, DDTree emits AR's very samples (the coupling tested below) and so
// reproduces AR's p-values exactly, which makes the comparison vacuous.
TEST_P(SamplingProcessors, DDTreeMatchesTheProcessedDistribution) { expect_matches(true, 31); }

TEST_P(SamplingProcessors, OneSeedGivesARsTokensInEveryMode) {
  for (uint64_t seed : {1u, 42u, 777u}) {
    DecodeOptions o = options(SpecMode::kNone, 0);
    o.seed = seed;
    o.max_new = 40;
    const std::vector<int32_t> ar = decode(toy, nullptr, prompt, o).tokens;
    ToyAwareDrafter aware(toy, kVocab, 7, seed);
    o.spec = SpecMode::kDDTree;
    o.budget = 6;
    EXPECT_EQ(decode(toy, &aware, prompt, o).tokens, ar) << processor.name;
    o.spec = SpecMode::kDFlash;
    EXPECT_EQ(decode(toy, &aware, prompt, o).tokens, ar) << processor.name;
  }
}

INSTANTIATE_TEST_SUITE_P(EachProcessor, SamplingProcessors, ::testing::Range(0, 7));

// The positive control: the test rejects AR samples drawn without the processor.
TEST(SamplingProcessorsControl, TheTestRejectsTheUnprocessedDistribution) {
  ToyTarget toy{kVocab, 77, 4096, 1.5};
  const std::vector<int32_t> prompt{2, 0};
  for (const Processor& p : processors()) {
    std::vector<int64_t> first(static_cast<size_t>(std::pow(kVocab, kGram)), 0);
    DecodeOptions o;
    o.max_new = kNew;
    o.temperature = kTemperature;
    for (int run = 0; run < kRuns; ++run) {
      o.seed = 13 + 1000003ull * (run + 1);
      const DecodeResult r = decode(toy, nullptr, prompt, o);
      ++first[(r.tokens[0] * kVocab + r.tokens[1]) * kVocab + r.tokens[2]];
    }
    EXPECT_LT(chi_square_p(first, exact_gram_probs(toy, prompt, p.options, 0), kRuns), kAlpha) << p.name;
  }
}

TEST(SamplingProcessorsGreedy, PenaltiesApplyAtTemperatureZeroAndDDTreeKeepsThem) {
  ToyTarget toy{kVocab, 77, 4096, 1.5};
  const std::vector<int32_t> prompt{2, 0};
  DecodeOptions o;
  o.max_new = 30;
  const std::vector<int32_t> plain = decode(toy, nullptr, prompt, o).tokens;
  o.sampling.repetition_penalty = 3.0;
  o.sampling.frequency_penalty = 0.5;
  const std::vector<int32_t> penalised = decode(toy, nullptr, prompt, o).tokens;
  EXPECT_NE(penalised, plain);
  ToyAwareDrafter aware(toy, kVocab, 7, 3);
  o.spec = SpecMode::kDDTree;
  o.budget = 6;
  EXPECT_EQ(decode(toy, &aware, prompt, o).tokens, penalised);
}

// ---- each processor on hand-made logits ----

std::vector<double> weights_of(const std::vector<float>& logits) {
  std::vector<double> w;
  for (float l : logits) w.push_back(std::exp(l));
  return w;
}

std::vector<int> kept(const std::vector<double>& w) {
  std::vector<int> ids;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0) ids.push_back(static_cast<int>(i));
  return ids;
}

TEST(LogitsProcessor, Truncations) {
  const std::vector<float> logits{1.0f, 3.0f, 2.0f, 0.0f, 2.5f};  // probabilities ~ .06 .47 .17 .02 .28
  SamplingOptions o;
  o.top_k = 2;
  std::vector<double> w = weights_of(logits);
  LogitsProcessor(o, {}).truncate(w);
  EXPECT_EQ(kept(w), (std::vector<int>{1, 4}));
  o = {};
  o.top_p = 0.7;  // .47 + .28 = .75 reaches it
  w = weights_of(logits);
  LogitsProcessor(o, {}).truncate(w);
  EXPECT_EQ(kept(w), (std::vector<int>{1, 4}));
  o.top_p = 0.4;  // the top token alone
  w = weights_of(logits);
  LogitsProcessor(o, {}).truncate(w);
  EXPECT_EQ(kept(w), (std::vector<int>{1}));
  o = {};
  o.min_p = 0.3;  // e^(l - 3) >= 0.3: l >= 3 + ln 0.3 = 1.796
  w = weights_of(logits);
  LogitsProcessor(o, {}).truncate(w);
  EXPECT_EQ(kept(w), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(w[2], weights_of(logits)[2]) << "kept weights are untouched";
}

TEST(LogitsProcessor, Penalties) {
  const std::vector<float> logits{2.0f, -1.0f, 0.5f, 4.0f};
  SamplingOptions o;
  o.repetition_penalty = 2.0;
  o.frequency_penalty = 0.25;
  o.presence_penalty = 0.5;
  LogitsProcessor p(o, std::vector<int32_t>{0, 1});  // the prompt: repetition only
  p.observe(2);
  p.observe(2);
  std::vector<float> scratch;
  const float* out = p.penalised(logits.data(), 4, scratch);
  EXPECT_FLOAT_EQ(out[0], 1.0f) << "positive / 2";
  EXPECT_FLOAT_EQ(out[1], -2.0f) << "negative x 2";
  EXPECT_FLOAT_EQ(out[2], 0.25f - 0.5f - 0.5f) << "in the output twice: / 2, - 2 x 0.25, - 0.5";
  EXPECT_FLOAT_EQ(out[3], 4.0f) << "never seen";
  EXPECT_EQ(logits[0], 2.0f) << "the target's logits are not written";
  // No penalty: the logits themselves.
  LogitsProcessor none({}, std::vector<int32_t>{0});
  EXPECT_EQ(none.penalised(logits.data(), 4, scratch), logits.data());
}

TEST(LogitsProcessor, TheSamplerIsGreedyOnlyWithoutPenalties) {
  EXPECT_TRUE(TokenSampler(0.0, 1).greedy());
  SamplingOptions top;
  top.top_k = 3;
  EXPECT_TRUE(TokenSampler(0.0, 1, top).greedy()) << "truncations keep the argmax";
  SamplingOptions rep;
  rep.repetition_penalty = 1.2;
  EXPECT_FALSE(TokenSampler(0.0, 1, rep).greedy()) << "a penalty needs the logits";
  // Greedy with a penalty: the argmax of the penalised logits.
  const std::vector<float> logits{3.0f, 2.0f};
  TokenSampler s(0.0, 1, rep, std::vector<int32_t>{0});
  rep.repetition_penalty = 2.0;
  TokenSampler strong(0.0, 1, rep, std::vector<int32_t>{0});
  EXPECT_EQ(s.pick(logits.data(), 2), 0) << "3 / 1.2 = 2.5 still wins";
  EXPECT_EQ(strong.pick(logits.data(), 2), 1) << "3 / 2 = 1.5 loses to 2";
}

TEST(LogitsProcessor, BadValuesAreRefusedByName) {
  auto refused = [](SamplingOptions o, const std::string& field) {
    try {
      validate_sampling(o, "opts.");
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("opts." + field, 0), 0u) << e.what();
      return;
    }
    ADD_FAILURE() << field << " accepted";
  };
  SamplingOptions o;
  o.top_k = -1;
  refused(o, "top_k");
  o = {};
  o.top_p = 0;
  refused(o, "top_p");
  o.top_p = 1.5;
  refused(o, "top_p");
  o.top_p = NAN;
  refused(o, "top_p");
  o = {};
  o.min_p = -0.1;
  refused(o, "min_p");
  o = {};
  o.repetition_penalty = 0;
  refused(o, "repetition_penalty");
  o = {};
  o.frequency_penalty = INFINITY;
  refused(o, "frequency_penalty");
  o = {};
  o.presence_penalty = NAN;
  refused(o, "presence_penalty");
  EXPECT_NO_THROW(validate_sampling({}));
}

}  // namespace
}  // namespace kplan
