#pragma once
// Picks the next token from a row of target logits: the argmax at temperature 0 (ties go to the
// lowest id, as in AR greedy decoding), else a sample from softmax(logits / temperature).
#include <cstdint>

#include "runtime/ddtree/random_stream.h"
#include "runtime/step_model.h"

namespace kplan {

// Index of the largest value (the first one on ties).
int32_t argmax(const float* values, int64_t n);

class TokenSampler {
 public:
  TokenSampler(double temperature, uint64_t seed);
  int32_t pick(const float* logits, int64_t vocab);
  // Row `row` of a step: greedy picks read the device's argmax ids when the step has them.
  int32_t pick(const StepOutput& out, int64_t row);
  bool greedy() const { return temperature_ <= 0.0; }

 private:
  double temperature_;
  RandomStream random_;
};

}  // namespace kplan
