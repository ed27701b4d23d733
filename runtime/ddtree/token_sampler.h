#pragma once
// Picks the next token from a row of target logits, through the sampling processors
// (logits_processor.h): the argmax of the penalised logits at temperature 0 (ties go to the lowest
// id, as in AR greedy decoding), else a sample from the truncated softmax(penalised / temperature).
// Every pick counts as emitted (the decode loops emit every token they pick, the tree walk too),
// so the penalties see the prompt and the output so far.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/ddtree/logits_processor.h"
#include "runtime/ddtree/random_stream.h"
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

 private:
  double temperature_;
  RandomStream random_;
  LogitsProcessor processor_;
  std::vector<float> penalised_;
  std::vector<double> weights_;
};

}  // namespace kplan
