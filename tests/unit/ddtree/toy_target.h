#pragma once
// Test doubles for the decode loops: a toy target whose next-token distribution is a seeded
// random trigram table over a tiny vocabulary, with a real token history standing in for the
// KV cache (pending entries after a step, compaction on commit), and a drafter that records
// what it observed. The toy checks the verify step's layout itself: each token's position must
// equal the committed length plus its depth among the step's tokens (from the mask), and a
// commit must keep a chain at consecutive positions; any slip throws, failing the test.
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/random_stream.h"
#include "ir/support/tree_mask.h"
#include "runtime/step_model.h"

namespace kplan::test {

// The decode options the toy tests vary: mode, budget, tokens.
inline DecodeOptions options_for(SpecMode spec, int64_t budget, int64_t max_new) {
  DecodeOptions o;
  o.spec = spec;
  o.budget = budget;
  o.max_new = max_new;
  return o;
}

class ToyTarget : public TargetModel {
 public:
  // Logits for context (a, b) are uniform in [-spread, spread]; missing context tokens (at the
  // start) read as id `vocab`.
  ToyTarget(int64_t vocab, uint64_t seed, int64_t max_context = 4096, double spread = 2.0)
      : vocab_(vocab), max_context_(max_context) {
    config_.vocab_size = vocab;
    config_.num_hidden_layers = 4;
    RandomStream random(seed);
    table_.resize(static_cast<size_t>((vocab + 1) * (vocab + 1) * vocab));
    for (float& v : table_) v = static_cast<float>(spread * (2.0 * random.uniform() - 1.0));
  }

  // The target's logits after a token history.
  const float* logits_after(std::span<const int32_t> history) const {
    const int64_t n = static_cast<int64_t>(history.size());
    const int64_t a = n >= 2 ? history[n - 2] : vocab_;
    const int64_t b = n >= 1 ? history[n - 1] : vocab_;
    return table_.data() + (a * (vocab_ + 1) + b) * vocab_;
  }

  const ModelConfig& config() const override { return config_; }

  StepOutput forward(const StepInput& in) override {
    const int64_t t = static_cast<int64_t>(in.tokens.size());
    if (static_cast<int64_t>(in.positions.size()) != t) throw std::logic_error("toy: positions");
    if (committed_length() + t > max_context_) throw std::logic_error("toy: context overflow");
    if (!in.tree_mask.empty() && static_cast<int64_t>(in.tree_mask.size()) != t * mask_words(t))
      throw std::logic_error("toy: mask size");
    ++forwards;
    max_step_tokens = std::max(max_step_tokens, t);
    StepOutput out;
    out.logits = Matrix(t, vocab_);
    for (int64_t l : capture_) {
      (void)l;
      out.captured.emplace_back(t, 2);
    }
    pending_.assign(in.tokens.begin(), in.tokens.end());
    pending_positions_.assign(in.positions.begin(), in.positions.end());
    for (int64_t i = 0; i < t; ++i) {
      std::vector<int32_t> history = committed_;
      for (int64_t j = 0; j <= i; ++j) {
        const bool visible = in.tree_mask.empty() ? true : mask_bit(in.tree_mask, t, i, j);
        if (visible) history.push_back(in.tokens[j]);
      }
      if (in.tree_mask.empty() == false && !mask_bit(in.tree_mask, t, i, i))
        throw std::logic_error("toy: a token must see itself");
      for (int64_t j = i + 1; !in.tree_mask.empty() && j < t; ++j)
        if (mask_bit(in.tree_mask, t, i, j)) throw std::logic_error("toy: mask sees a later token");
      if (in.positions[i] != static_cast<int32_t>(history.size()) - 1)
        throw std::logic_error("toy: token " + std::to_string(i) + " at position " +
                               std::to_string(in.positions[i]) + ", its context says " +
                               std::to_string(history.size() - 1));
      const float* row = logits_after(history);
      std::copy(row, row + vocab_, out.logits.row(i));
      for (size_t c = 0; c < capture_.size(); ++c) {
        out.captured[c].row(i)[0] = static_cast<float>(in.tokens[i]);
        out.captured[c].row(i)[1] = static_cast<float>(in.positions[i]);
      }
    }
    return out;
  }

  void commit(std::span<const int32_t> keep) override {
    for (size_t k = 0; k < keep.size(); ++k) {
      const int32_t slot = keep[k];
      if (slot < 0 || slot >= static_cast<int32_t>(pending_.size()))
        throw std::logic_error("toy: commit of a slot outside the step");
      if (pending_positions_[slot] != committed_length())
        throw std::logic_error("toy: committed slots are not a chain at consecutive positions");
      committed_.push_back(pending_[slot]);
    }
    pending_.clear();
  }

  int64_t cache_length() const override { return committed_length(); }
  int64_t max_context() const override { return max_context_; }
  void reset() override {
    committed_.clear();
    pending_.clear();
  }
  void set_capture_layers(std::vector<int64_t> layer_ids) override { capture_ = layer_ids; }

  const std::vector<int32_t>& committed() const { return committed_; }
  int64_t forwards = 0;
  int64_t max_step_tokens = 0;

 private:
  int64_t committed_length() const { return static_cast<int64_t>(committed_.size()); }
  int64_t vocab_, max_context_;
  ModelConfig config_;
  std::vector<float> table_;
  std::vector<int32_t> committed_, pending_, pending_positions_;
  std::vector<int64_t> capture_;
};

// Wraps a drafter and records what observe() was given, checking the captured rows (the toy
// target writes each token's id and position into them) against the tokens and positions.
class RecordingDrafter : public Drafter {
 public:
  explicit RecordingDrafter(Drafter& inner) : inner_(inner) {}
  void observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
               const std::vector<Matrix>& captured) override {
    if (captured.size() != 2) throw std::logic_error("recording drafter: expected 2 captures");
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (positions[i] != static_cast<int32_t>(observed.size()))
        throw std::logic_error("recording drafter: observed positions are not consecutive");
      for (const Matrix& m : captured)
        if (m.row(i)[0] != tokens[i] || m.row(i)[1] != positions[i])
          throw std::logic_error("recording drafter: captured rows do not match the tokens");
      observed.push_back(tokens[i]);
    }
    inner_.observe(tokens, positions, captured);
  }
  Matrix propose(int32_t bonus_token, int32_t bonus_position) override {
    if (bonus_position != static_cast<int32_t>(observed.size()))
      throw std::logic_error("recording drafter: bonus position is not the observed length");
    return inner_.propose(bonus_token, bonus_position);
  }
  std::vector<int64_t> capture_layers() const override { return {1, 3}; }
  int64_t max_depth() const override { return inner_.max_depth(); }
  void reset() override {
    observed.clear();
    inner_.reset();
  }
  std::vector<int32_t> observed;

 private:
  Drafter& inner_;
};

// A drafter that knows the toy's table: at each depth it proposes the toy's distribution along
// its own greedy guess of the path, flattened by `temperature` and mixed with noise, so trees
// accept often but not always, and branch.
class ToyAwareDrafter : public Drafter {
 public:
  ToyAwareDrafter(const ToyTarget& toy, int64_t vocab, int64_t depth, uint64_t seed)
      : toy_(toy), vocab_(vocab), depth_(depth), seed_(seed), random_(seed) {}
  void observe(std::span<const int32_t> tokens, std::span<const int32_t>,
               const std::vector<Matrix>&) override {
    history_.insert(history_.end(), tokens.begin(), tokens.end());
  }
  Matrix propose(int32_t bonus_token, int32_t) override {
    std::vector<int32_t> guess = history_;
    guess.push_back(bonus_token);
    Matrix out(depth_, vocab_);
    for (int64_t d = 0; d < depth_; ++d) {
      const float* row = toy_.logits_after(guess);
      int32_t best = 0;
      for (int64_t v = 0; v < vocab_; ++v) {
        out.row(d)[v] = static_cast<float>(row[v] + random_.uniform());
        if (out.row(d)[v] > out.row(d)[best]) best = static_cast<int32_t>(v);
      }
      guess.push_back(best);
    }
    return out;  // raw logits: the tree builder normalises them
  }
  int64_t max_depth() const override { return depth_; }
  void reset() override {
    history_.clear();
    random_ = RandomStream(seed_);
  }

 private:
  const ToyTarget& toy_;
  int64_t vocab_, depth_;
  uint64_t seed_;
  RandomStream random_;
  std::vector<int32_t> history_;
};

}  // namespace kplan::test
