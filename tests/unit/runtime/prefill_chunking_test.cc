// Prompt chunking: every decode loop (AR, DFlash, DDTree) and the C API feed a prompt longer than
// the target's largest step in chunks of it. A host target that refuses steps above 16 tokens
// (as the GPU refuses more than its largest bucket) decodes a 200-token prompt exactly as the
// same target without a limit.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "ir/support/error.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/oracle_drafter.h"
#include "runtime/ddtree/prefill.h"
#include "runtime/ddtree/random_drafter.h"

namespace kplan {
namespace {

constexpr int64_t kVocab = 48;

// Logits of a token are a hash of the tokens it sees (committed cache, then its visible step
// tokens, in order) and its position; captured layer "0" holds each token's id.
class HashTarget final : public TargetModel {
 public:
  explicit HashTarget(int64_t max_step) : max_step_(max_step) {
    config_.vocab_size = kVocab;
    config_.hidden_size = 2;
  }
  const ModelConfig& config() const override { return config_; }
  StepOutput forward(const StepInput& in) override {
    const int64_t t = static_cast<int64_t>(in.tokens.size());
    if (max_step_ > 0 && t > max_step_)
      throw Error("a step of " + std::to_string(t) + " tokens exceeds the largest step (" + std::to_string(max_step_) + ")");
    const int64_t words = (t + 31) / 32;
    StepOutput out;
    out.logits = Matrix(t, kVocab);
    for (int64_t i = 0; i < t; ++i) {
      uint64_t h = 1469598103934665603ull;
      auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
      for (int32_t c : cache_) mix(static_cast<uint64_t>(c));
      for (int64_t j = 0; j <= i; ++j) {
        const bool sees = in.tree_mask.empty() ? true : (in.tree_mask[i * words + j / 32] >> (j % 32)) & 1u;
        if (sees) mix(static_cast<uint64_t>(in.tokens[j]));
      }
      mix(static_cast<uint64_t>(in.positions[i]) + 7777);
      for (int64_t v = 0; v < kVocab; ++v) {
        uint64_t x = h ^ (static_cast<uint64_t>(v) * 0x9E3779B97F4A7C15ull);
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        out.logits.row(i)[v] = static_cast<float>(x % 100000) / 1000.0f;
      }
    }
    if (capture_) {
      Matrix m(t, 2);
      for (int64_t i = 0; i < t; ++i) m.row(i)[0] = static_cast<float>(in.tokens[i]);
      out.captured.push_back(std::move(m));
    }
    pending_ = in.tokens;
    ++steps_;
    return out;
  }
  void commit(std::span<const int32_t> keep) override {
    for (int32_t k : keep) cache_.push_back(pending_[static_cast<size_t>(k)]);
    pending_.clear();
  }
  int64_t cache_length() const override { return static_cast<int64_t>(cache_.size()); }
  int64_t max_context() const override { return 1024; }
  int64_t max_step_tokens() const override { return max_step_; }
  void reset() override {
    cache_.clear();
    pending_.clear();
  }
  void set_capture_layers(std::vector<int64_t> layers) override { capture_ = !layers.empty(); }
  int64_t steps() const { return steps_; }

 private:
  ModelConfig config_;
  int64_t max_step_;
  std::vector<int32_t> cache_, pending_;
  bool capture_ = false;
  int64_t steps_ = 0;
};

std::vector<int32_t> long_prompt() {
  std::vector<int32_t> p(200);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>((i * 13 + 5) % kVocab);
  return p;
}

DecodeResult run(TargetModel& target, SpecMode spec, Drafter* drafter) {
  DecodeOptions o;
  o.spec = spec;
  o.budget = 6;
  o.max_new = 12;
  return decode(target, drafter, long_prompt(), o);
}

TEST(PrefillChunking, EveryLoopChunksAPromptLongerThanTheLargestStep) {
  HashTarget unlimited(0), limited(16);
  const DecodeResult want = run(unlimited, SpecMode::kNone, nullptr);
  ASSERT_EQ(want.tokens.size(), 12u);
  const DecodeResult ar = run(limited, SpecMode::kNone, nullptr);
  EXPECT_EQ(ar.tokens, want.tokens) << "AR";
  EXPECT_EQ(ar.stats.prefill_steps, 13) << "200 tokens in chunks of 16";

  std::vector<int32_t> truth = long_prompt();
  truth.insert(truth.end(), want.tokens.begin(), want.tokens.end());
  OracleDrafter oracle(truth, kVocab, 5, 0.7, 3);
  EXPECT_EQ(run(limited, SpecMode::kDFlash, &oracle).tokens, want.tokens) << "DFlash";
  RandomDrafter random(kVocab, 5, 4);
  EXPECT_EQ(run(limited, SpecMode::kDDTree, &random).tokens, want.tokens) << "DDTree, random drafter";
  EXPECT_EQ(run(limited, SpecMode::kDDTree, &oracle).tokens, want.tokens) << "DDTree, oracle drafter";
}

TEST(PrefillChunking, CapturedRowsCoverTheWholePromptAndLogitsTheLastChunk) {
  HashTarget limited(16), unlimited(0);
  limited.set_capture_layers({0});
  unlimited.set_capture_layers({0});
  const std::vector<int32_t> prompt = long_prompt();
  const StepOutput got = prefill(limited, prompt);
  const StepOutput want = prefill(unlimited, prompt);
  EXPECT_EQ(limited.cache_length(), 200);
  EXPECT_EQ(limited.steps(), 13);
  ASSERT_EQ(got.captured.size(), 1u);
  ASSERT_EQ(got.captured[0].rows, 200);
  for (int64_t i = 0; i < 200; ++i) ASSERT_EQ(got.captured[0].row(i)[0], static_cast<float>(prompt[i])) << i;
  ASSERT_EQ(got.logits.rows, 200 - 12 * 16);
  for (int64_t v = 0; v < kVocab; ++v)
    EXPECT_EQ(got.logits.row(got.logits.rows - 1)[v], want.logits.row(199)[v]) << v;
}

TEST(PrefillChunking, ATargetWithoutALimitTakesThePromptInOneStep) {
  HashTarget unlimited(0);
  prefill(unlimited, long_prompt());
  EXPECT_EQ(unlimited.steps(), 1);
  EXPECT_EQ(prefill_steps(unlimited, 200), 1);
}

}  // namespace
}  // namespace kplan
