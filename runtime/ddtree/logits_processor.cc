#include "runtime/ddtree/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/support/error.h"

namespace kplan {

void validate_sampling(const SamplingOptions& o, const std::string& prefix) {
  auto fail = [&](const std::string& field, const std::string& why, double value) {
    throw Error(prefix + field + " " + why + " (got " + std::to_string(value) + ")");
  };
  if (o.top_k < 0) fail("top_k", "must not be negative (0: off)", static_cast<double>(o.top_k));
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) fail("top_p", "must be within (0, 1] (1: off)", o.top_p);
  if (!(o.min_p >= 0.0 && o.min_p <= 1.0)) fail("min_p", "must be within [0, 1] (0: off)", o.min_p);
  if (!(o.repetition_penalty > 0.0) || std::isinf(o.repetition_penalty))
    fail("repetition_penalty", "must be a finite number > 0 (1: off)", o.repetition_penalty);
  if (!std::isfinite(o.frequency_penalty)) fail("frequency_penalty", "must be finite (0: off)", o.frequency_penalty);
  if (!std::isfinite(o.presence_penalty)) fail("presence_penalty", "must be finite (0: off)", o.presence_penalty);
}

LogitsProcessor::LogitsProcessor(const SamplingOptions& options, std::span<const int32_t> prompt)
    : options_(options) {
  if (options_.repetition_penalty != 1.0)
    for (int32_t t : prompt) seen_[t] = true;
}

void LogitsProcessor::observe(int32_t token) {
  if (!options_.penalises()) return;
  ++output_counts_[token];
  if (options_.repetition_penalty != 1.0) seen_[token] = true;
}

const float* LogitsProcessor::penalised(const float* logits, int64_t vocab, std::vector<float>& scratch) const {
  if (!options_.penalises()) return logits;
  scratch.assign(logits, logits + vocab);
  const auto r = static_cast<float>(options_.repetition_penalty);
  if (options_.repetition_penalty != 1.0)
    for (const auto& [token, _] : seen_) {
      if (token < 0 || token >= vocab) continue;
      float& l = scratch[static_cast<size_t>(token)];
      l = l > 0 ? l / r : l * r;
    }
  if (options_.frequency_penalty != 0.0 || options_.presence_penalty != 0.0)
    for (const auto& [token, count] : output_counts_) {
      if (token < 0 || token >= vocab) continue;
      scratch[static_cast<size_t>(token)] -= static_cast<float>(options_.frequency_penalty * static_cast<double>(count) +
                                                                options_.presence_penalty);
    }
  return scratch.data();
}

void LogitsProcessor::truncate(std::vector<double>& w) const {
  if (!options_.truncates()) return;
  const auto n = static_cast<int64_t>(w.size());
  // The ids by weight, most likely first (ties: the lower id first, as argmax does).
  std::vector<int32_t> order(w.size());
  std::iota(order.begin(), order.end(), 0);
  auto by_weight = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
  int64_t keep = n;
  if (options_.top_k > 0 && options_.top_k < n) keep = options_.top_k;
  const bool needs_order = options_.top_p < 1.0 || keep < n;
  if (needs_order) {
    if (options_.top_p < 1.0) {
      std::sort(order.begin(), order.end(), by_weight);
    } else {
      std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_weight);
    }
  }
  if (options_.top_p < 1.0) {
    double total = 0.0;
    for (int64_t i = 0; i < keep; ++i) total += w[order[i]];
    // The fewest tokens whose probability (renormalised after top-k) reaches top_p.
    double mass = 0.0;
    int64_t i = 0;
    while (i < keep) {
      mass += w[order[i++]];
      if (mass >= options_.top_p * total) break;
    }
    keep = i;
  }
  if (needs_order)
    for (int64_t i = keep; i < n; ++i) w[order[i]] = 0.0;
  if (options_.min_p > 0.0) {
    const double top = *std::max_element(w.begin(), w.end());
    const double floor = options_.min_p * top;
    for (double& x : w)
      if (x < floor) x = 0.0;
  }
}

}  // namespace kplan
