#include "runtime/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "ir/support/error.h"

namespace kplan::cpu {

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

// transformers' find_correction_dim: the dimension whose wavelength makes `rotations` turns
// over `max_pos` positions.
double correction_dim(double rotations, int64_t dim, double base, double max_pos) {
  return (static_cast<double>(dim) * std::log(max_pos / (rotations * 2.0 * std::numbers::pi))) /
         (2.0 * std::log(base));
}

}  // namespace

Rope::Rope(int64_t dim, double theta, const RopeScaling& scaling,
           int64_t max_position_embeddings, std::optional<double> attention_factor)
    : dim_(dim) {
  init(theta, scaling, max_position_embeddings);
  if (attention_factor) attention_factor_ = static_cast<float>(*attention_factor);
}

void Rope::init(double theta, const RopeScaling& scaling, int64_t max_position_embeddings) {
  const int64_t dim = dim_;
  if (dim <= 0 || dim % 2 != 0)
    throw Error("rope: rotated dimension must be even and positive, got " + std::to_string(dim));
  const int64_t half = dim / 2;
  // base ** (arange(0, dim, 2) / dim), in fp32 as torch computes it.
  std::vector<float> pos_freqs(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    pos_freqs[i] = static_cast<float>(std::pow(theta, static_cast<double>(exponent)));
  }
  inv_freq_.resize(static_cast<size_t>(half));
  if (scaling.type == "none") {
    for (int64_t i = 0; i < half; ++i) inv_freq_[i] = 1.0f / pos_freqs[i];
    return;
  }
  if (scaling.type != "yarn") throw Error("rope: unsupported rope_scaling type '" + scaling.type + "'");

  const double factor = scaling.factor;
  const double original = scaling.original_max_position_embeddings > 0
                              ? static_cast<double>(scaling.original_max_position_embeddings)
                              : static_cast<double>(max_position_embeddings);
  // transformers (current): attention_factor = get_mscale(f, mscale) / get_mscale(f, mscale_all_dim)
  // when both are set, else get_mscale(f). (Older releases always used get_mscale(f).)
  if (scaling.mscale != 0.0 && scaling.mscale_all_dim != 0.0)
    attention_factor_ = static_cast<float>(yarn_get_mscale(factor, scaling.mscale) /
                                           yarn_get_mscale(factor, scaling.mscale_all_dim));
  else
    attention_factor_ = static_cast<float>(yarn_get_mscale(factor, 1.0));

  // Correction range (truncated to integers, as transformers' default truncate=True).
  double low = std::floor(correction_dim(scaling.beta_fast, dim, theta, original));
  double high = std::ceil(correction_dim(scaling.beta_slow, dim, theta, original));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // transformers: prevent a zero-width ramp
  for (int64_t i = 0; i < half; ++i) {
    float ramp = static_cast<float>((static_cast<float>(i) - low) / (high - low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float extrapolation = 1.0f / pos_freqs[i];
    const float interpolation = 1.0f / (static_cast<float>(factor) * pos_freqs[i]);
    inv_freq_[i] = interpolation * (1.0f - extrapolation_factor) +
                   extrapolation * extrapolation_factor;
  }
}

void Rope::cos_sin(int64_t position, float* cos, float* sin) const {
  for (int64_t i = 0; i < dim_ / 2; ++i) {
    // freqs = inv_freq * position in fp32, then cos/sin, then the attention factor.
    const float angle = inv_freq_[i] * static_cast<float>(position);
    cos[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * attention_factor_;
    sin[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * attention_factor_;
  }
}

void Rope::apply_interleaved(float* x, int64_t position) const {
  const int64_t half = dim_ / 2;
  std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
  cos_sin(position, c.data(), s.data());
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c[i] - b * s[i];
    x[2 * i + 1] = b * c[i] + a * s[i];
  }
}

void Rope::apply_rotate_half(float* x, int64_t position) const {
  const int64_t half = dim_ / 2;
  std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
  cos_sin(position, c.data(), s.data());
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * c[i] - b * s[i];
    x[i + half] = b * c[i] + a * s[i];
  }
}

}  // namespace kplan::cpu
