#include "ir/support/yarn.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kplan::yarn {
namespace {

// base ** (2i / dim), in fp32 as torch computes it (the exponent in fp32, the power in double).
float pos_freq(int64_t i, int64_t dim, double theta) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
  return static_cast<float>(std::pow(theta, static_cast<double>(exponent)));
}

// transformers' find_correction_dim: the dim whose wavelength makes `rotations` turns over
// `max_pos` positions.
double correction_dim(double rotations, int64_t dim, double theta, double max_pos) {
  return (static_cast<double>(dim) * std::log(max_pos / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(theta));
}

}  // namespace

double get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double attention_factor(double factor, double mscale, double mscale_all_dim) {
  if (mscale != 0.0 && mscale_all_dim != 0.0) return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim);
  return get_mscale(factor, 1.0);
}

CorrectionRange correction_range(int64_t dim, double theta, double original_max_position_embeddings,
                                 double beta_fast, double beta_slow) {
  CorrectionRange r;
  r.low = std::max(std::floor(correction_dim(beta_fast, dim, theta, original_max_position_embeddings)), 0.0);
  r.high = std::min(std::ceil(correction_dim(beta_slow, dim, theta, original_max_position_embeddings)),
                    static_cast<double>(dim - 1));
  if (r.low == r.high) r.high += 0.001;  // transformers: prevent a zero-width ramp
  return r;
}

void inv_freq_plain(int64_t dim, double theta, float* out) {
  for (int64_t i = 0; i < dim / 2; ++i) out[i] = 1.0f / pos_freq(i, dim, theta);
}

void inv_freq_yarn(int64_t dim, double theta, double factor, CorrectionRange range, float* out) {
  for (int64_t i = 0; i < dim / 2; ++i) {
    float ramp = static_cast<float>((static_cast<float>(i) - range.low) / (range.high - range.low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float p = pos_freq(i, dim, theta);
    const float extrapolation = 1.0f / p;
    const float interpolation = 1.0f / (static_cast<float>(factor) * p);
    out[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
}

}  // namespace kplan::yarn
