#pragma once
// Picks the next token from a row of target logits, through the sampling processors
// (logits_processor.h): the argmax of the penalised logits at temperature 0 (ties go to the lowest
// id, as in AR greedy decoding), else a sample from the truncated softmax(penalised / temperature)
// with the k-th pick's uniform draw k of the seed (ir/support/sample_draws.h: counter-based, so a
// device round draws a tree's picks at once and equals this sampler).
// Every pick counts as emitted (the decode loops emit every token they pick, the tree walk too),
// so the penalties see the prompt and the output so far.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/ddtree/logits_processor.h"
#include "runtime/step_model.h"

namespace kplan {

struct DecodeOptions;

// Index of the largest value (the first one on ties).
int32_t argmax(const float* values, int64_t n);

class TokenSampler {
 public:
  TokenSampler(double temperature, uint64_t seed, const SamplingOptions& sampling = {},
               std::span<const int32_t> prompt = {});
  // The decode options' temperature, seed and sampling processors, over `prompt`.
  TokenSampler(const DecodeOptions& options, std::span<const int32_t> prompt);
  int32_t pick(const float* logits, int64_t vocab);
  // Row `row` of a step: greedy picks read the device's argmax ids when the step has them.
  int32_t pick(const StepOutput& out, int64_t row);
  // True when the pick is the argmax of the raw logits (temperature 0, no penalty): a step then
  // needs only the device's argmax ids, not the logits.
  bool greedy() const { return temperature_ <= 0.0 && !processor_.options().penalises(); }
  // True when a pick is a plain temperature sample (no processor), as a device round draws it.
  bool plain_temperature() const {
    return temperature_ > 0.0 && !processor_.options().penalises() && !processor_.options().truncates();
  }
  double temperature() const { return temperature_; }
  uint64_t seed() const { return seed_; }
  uint64_t draws() const { return draws_; }  // the next pick's draw index

 private:
  double temperature_;
  uint64_t seed_;
  uint64_t draws_ = 0;  // picks drawn so far: pick k uses draw k (ir/support/sample_draws.h)
  LogitsProcessor processor_;
  std::vector<float> penalised_;
  std::vector<double> weights_;
};

}  // namespace kplan
