#include "schemas/model_spec.h"

#include <cmath>

namespace kplan {

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  // transformers DeepseekV3Attention: with rope scaling and a non-zero mscale_all_dim,
  // multiply by yarn_get_mscale(factor, mscale_all_dim)^2 (which is 1 when factor <= 1).
  if (rope_scaling.type != "none" && rope_scaling.mscale_all_dim != 0.0 && rope_scaling.factor > 1.0) {
    double m = 0.1 * rope_scaling.mscale_all_dim * std::log(rope_scaling.factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

}  // namespace kplan
