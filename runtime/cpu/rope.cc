#include "runtime/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "ir/support/error.h"
#include "ir/support/yarn.h"

namespace kplan::cpu {

Rope::Rope(int64_t dim, double theta, const RopeScaling& scaling,
           int64_t max_position_embeddings, std::optional<double> attention_factor)
    : dim_(dim) {
  init(theta, scaling, max_position_embeddings);
  if (attention_factor) attention_factor_ = static_cast<float>(*attention_factor);
}

Rope::Rope(std::vector<float> inv_freq, float attention_factor)
    : dim_(2 * static_cast<int64_t>(inv_freq.size())), inv_freq_(std::move(inv_freq)), attention_factor_(attention_factor) {
  if (dim_ <= 0) throw Error("rope: no frequencies");
}

void Rope::init(double theta, const RopeScaling& scaling, int64_t max_position_embeddings) {
  const int64_t dim = dim_;
  if (dim <= 0 || dim % 2 != 0)
    throw Error("rope: rotated dimension must be even and positive, got " + std::to_string(dim));
  inv_freq_.resize(static_cast<size_t>(dim / 2));
  if (scaling.type == "none") {
    yarn::inv_freq_plain(dim, theta, inv_freq_.data());
    return;
  }
  if (scaling.type != "yarn") throw Error("rope: unsupported rope_scaling type '" + scaling.type + "'");
  const double original = scaling.original_max_position_embeddings > 0
                              ? static_cast<double>(scaling.original_max_position_embeddings)
                              : static_cast<double>(max_position_embeddings);
  // transformers (current) divides by get_mscale(f, mscale_all_dim) when both are set (older
  // releases always used get_mscale(f)).
  attention_factor_ = static_cast<float>(yarn::attention_factor(scaling.factor, scaling.mscale, scaling.mscale_all_dim));
  yarn::inv_freq_yarn(dim, theta, scaling.factor,
                      yarn::correction_range(dim, theta, original, scaling.beta_fast, scaling.beta_slow), inv_freq_.data());
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
