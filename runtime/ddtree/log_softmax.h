#pragma once
// Row-wise log-softmax, computed in double. Drafters return log-probabilities; the tree builder
// normalises its input again, so a drafter that hands back raw logits is still scored correctly.
#include "runtime/step_model.h"

namespace kplan {

void log_softmax_rows(Matrix& m);
void log_softmax_row(float* row, int64_t cols);

}  // namespace kplan
