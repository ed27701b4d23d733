#include "runtime/ddtree/token_sampler.h"

#include <cmath>
#include <string>
#include <vector>

#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "ir/support/sample_draws.h"
#include "runtime/ddtree/decode.h"

namespace kplan {

int32_t argmax(const float* values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best]) best = i;
  return static_cast<int32_t>(best);
}

TokenSampler::TokenSampler(double temperature, uint64_t seed, const SamplingOptions& sampling,
                           std::span<const int32_t> prompt)
    : temperature_(temperature), seed_(seed), processor_(sampling, prompt) {}

TokenSampler::TokenSampler(const DecodeOptions& options, std::span<const int32_t> prompt)
    : TokenSampler(options.temperature, options.seed, options.sampling, prompt) {}

int32_t TokenSampler::pick(const StepOutput& out, int64_t row) {
  if (greedy() && !out.token_ids.empty()) return out.token_ids[static_cast<size_t>(row)];
  return pick(out.logits.row(row), out.logits.cols);
}

int32_t TokenSampler::pick(const float* raw_logits, int64_t vocab) {
  // A NaN or infinite logit makes argmax pick id 0 and the softmax NaN: junk with exit 0.
  if (const int64_t i = first_non_finite(reinterpret_cast<const uint8_t*>(raw_logits), DType::F32, vocab); i >= 0)
    throw Error("the target's logits are not finite (" + std::to_string(raw_logits[i]) + " at id " + std::to_string(i) +
                "): the activations overflowed or a weight is damaged");
  const float* logits = processor_.penalised(raw_logits, vocab, penalised_);
  int32_t picked;
  if (temperature_ <= 0.0) {
    picked = argmax(logits, vocab);
  } else {
    const double top = logits[argmax(logits, vocab)];
    std::vector<double>& weights = weights_;
    weights.resize(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) weights[i] = std::exp((logits[i] - top) / temperature_);
    processor_.truncate(weights);
    double total = 0.0;
    for (int64_t i = 0; i < vocab; ++i) total += weights[i];
    // Inverse CDF; the last token with non-zero weight absorbs rounding at the top end.
    const double u = draws::uniform(seed_, draws_++) * total;
    double cumulative = 0.0;
    int64_t last_nonzero = 0;
    picked = -1;
    for (int64_t i = 0; i < vocab; ++i) {
      if (weights[i] == 0.0) continue;
      cumulative += weights[i];
      last_nonzero = i;
      if (u < cumulative) {
        picked = static_cast<int32_t>(i);
        break;
      }
    }
    if (picked < 0) picked = static_cast<int32_t>(last_nonzero);
  }
  processor_.observe(picked);
  return picked;
}

}  // namespace kplan
