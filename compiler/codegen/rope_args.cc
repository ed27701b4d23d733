#include "compiler/codegen/rope_args.h"

#include "ir/support/error.h"
#include "ir/support/yarn.h"

namespace kplan::codegen {

RopeArgs rope_args(int64_t dim, double theta, const std::string& scaling, double factor,
                   int64_t original_max_position_embeddings, double beta_fast, double beta_slow,
                   double attention_factor) {
  RopeArgs a;
  a.theta = static_cast<float>(theta);
  a.cos_sin_scale = static_cast<float>(attention_factor);
  if (scaling == "none") return a;
  if (scaling != "yarn") throw Error("codegen: rope scaling '" + scaling + "' is not supported");
  const yarn::CorrectionRange range =
      yarn::correction_range(dim, theta, static_cast<double>(original_max_position_embeddings), beta_fast, beta_slow);
  const double low = range.low, high = range.high;
  a.yarn_factor = static_cast<float>(factor);
  a.yarn_low = static_cast<float>(low);
  a.yarn_high = static_cast<float>(high);
  return a;
}

}  // namespace kplan::codegen
