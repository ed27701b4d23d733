#include "compiler/codegen/rope_args.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ir/support/error.h"

namespace kplan::codegen {

RopeArgs rope_args(int64_t dim, double theta, const std::string& scaling, double factor,
                   int64_t original_max_position_embeddings, double beta_fast, double beta_slow,
                   double attention_factor) {
  RopeArgs a;
  a.theta = static_cast<float>(theta);
  a.cos_sin_scale = static_cast<float>(attention_factor);
  if (scaling == "none") return a;
  if (scaling != "yarn") throw Error("codegen: rope scaling '" + scaling + "' is not supported");
  const double d = static_cast<double>(dim);
  auto corr = [&](double rotations) {
    return d * std::log(static_cast<double>(original_max_position_embeddings) / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(theta));
  };
  double low = std::max(std::floor(corr(beta_fast)), 0.0);
  double high = std::min(std::ceil(corr(beta_slow)), d - 1);
  if (low == high) high += 0.001;
  a.yarn_factor = static_cast<float>(factor);
  a.yarn_low = static_cast<float>(low);
  a.yarn_high = static_cast<float>(high);
  return a;
}

}  // namespace kplan::codegen
