#include "runtime/ddtree/token_sampler.h"

#include <cmath>
#include <string>
#include <vector>

#include "ir/support/dtype.h"
#include "ir/support/error.h"

namespace kplan {

int32_t argmax(const float* values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best]) best = i;
  return static_cast<int32_t>(best);
}

TokenSampler::TokenSampler(double temperature, uint64_t seed)
    : temperature_(temperature), random_(seed) {}

int32_t TokenSampler::pick(const StepOutput& out, int64_t row) {
  if (greedy() && !out.token_ids.empty()) return out.token_ids[static_cast<size_t>(row)];
  return pick(out.logits.row(row), out.logits.cols);
}

int32_t TokenSampler::pick(const float* logits, int64_t vocab) {
  // A NaN or infinite logit makes argmax pick id 0 and the softmax NaN: junk with exit 0.
  if (const int64_t i = first_non_finite(reinterpret_cast<const uint8_t*>(logits), DType::F32, vocab); i >= 0)
    throw Error("the target's logits are not finite (" + std::to_string(logits[i]) + " at id " + std::to_string(i) +
                "): the activations overflowed or a weight is damaged");
  if (greedy()) return argmax(logits, vocab);
  const double top = logits[argmax(logits, vocab)];
  std::vector<double> weights(static_cast<size_t>(vocab));
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    weights[i] = std::exp((logits[i] - top) / temperature_);
    total += weights[i];
  }
  // Inverse CDF; the last token with non-zero weight absorbs rounding at the top end.
  const double u = random_.uniform() * total;
  double cumulative = 0.0;
  int64_t last_nonzero = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (weights[i] == 0.0) continue;
    cumulative += weights[i];
    last_nonzero = i;
    if (u < cumulative) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last_nonzero);
}

}  // namespace kplan
