#include "runtime/ddtree/log_softmax.h"

#include <cmath>
#include <limits>

namespace kplan {

void log_softmax_row(float* row, int64_t cols) {
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < cols; ++c) top = std::fmax(top, row[c]);
  if (!std::isfinite(top)) return;  // all -inf (or NaN): nothing to normalise
  double total = 0.0;
  for (int64_t c = 0; c < cols; ++c) total += std::exp(row[c] - top);
  const double log_z = top + std::log(total);
  for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(row[c] - log_z);
}

void log_softmax_rows(Matrix& m) {
  for (int64_t r = 0; r < m.rows; ++r) log_softmax_row(m.row(r), m.cols);
}

}  // namespace kplan
