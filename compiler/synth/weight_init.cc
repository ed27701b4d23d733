#include "compiler/synth/weight_init.h"

#include <cmath>

#include "compiler/synth/prng.h"

namespace kplan {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

InitRule init_rule(const std::string& name, const std::vector<int64_t>& shape) {
  // HF initialises projections with std 0.02 (initializer_range). On a tiny model that makes
  // every layer's output ~100x smaller than an embedding row, so the logits would hardly depend
  // on attention or the experts and tests could not see bugs there. Instead each matrix gets
  // std 1/sqrt(fan_in): outputs keep the scale of their (normalised) inputs.
  if (ends_with(name, "embed_tokens.weight")) return {0.0, 1.0};
  if (ends_with(name, "mlp.gate.e_score_correction_bias"))
    // Comparable to the spread of sigmoid scores, so the bias sometimes changes which experts
    // win (as in real checkpoints) but does not decide routing alone.
    return {0.0, 0.1};
  if (shape.size() == 1)  // RMSNorm weights: around 1, but not exactly, so a missing one shows.
    return {1.0, 0.1};
  const double fan_in = shape.size() >= 2 ? static_cast<double>(shape.back()) : 1.0;
  const double unit = 1.0 / std::sqrt(fan_in);
  if (ends_with(name, "lm_head.weight"))
    // Logit std ~4: the top two of a 1000-word vocabulary are typically ~1 apart, far beyond
    // fp32 rounding differences between implementations, so greedy tokens agree.
    return {0.0, 4.0 * unit};
  if (ends_with(name, "mlp.gate.weight"))
    // Router logits std ~2: sigmoid scores spread over (0.1, 0.9) so each token picks its own
    // experts and the top-k has clear gaps.
    return {0.0, 2.0 * unit};
  return {0.0, unit};
}

std::vector<float> synth_values(uint64_t seed, const std::string& stream_name,
                                const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const InitRule rule = init_rule(stream_name, shape);
  Prng prng = Prng::for_stream(seed, stream_name);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = static_cast<float>(prng.normal(rule.mean, rule.stddev));
  return values;
}

}  // namespace kplan
