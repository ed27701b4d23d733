#include "runtime/ddtree/log_softmax.h"

#include <cmath>
#include <limits>

namespace kplan {

void log_softmax_rows(Matrix& m) {
  for (int64_t r = 0; r < m.rows; ++r) {
    float* row = m.row(r);
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < m.cols; ++c) top = std::fmax(top, row[c]);
    if (!std::isfinite(top)) continue;  // all -inf (or NaN): nothing to normalise
    double total = 0.0;
    for (int64_t c = 0; c < m.cols; ++c) total += std::exp(row[c] - top);
    const double log_z = top + std::log(total);
    for (int64_t c = 0; c < m.cols; ++c) row[c] = static_cast<float>(row[c] - log_z);
  }
}

}  // namespace kplan
