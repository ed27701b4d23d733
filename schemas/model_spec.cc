#include "schemas/model_spec.h"

#include <cmath>

#include "ir/support/yarn.h"

namespace kplan {

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  // transformers DeepseekV3Attention: with rope scaling and a non-zero mscale_all_dim,
  // multiply by get_mscale(factor, mscale_all_dim)^2 (which is 1 when factor <= 1).
  if (rope_scaling.type != "none" && rope_scaling.mscale_all_dim != 0.0) {
    const double m = yarn::get_mscale(rope_scaling.factor, rope_scaling.mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

}  // namespace kplan
