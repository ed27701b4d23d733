#include "runtime/ddtree/oracle_drafter.h"

#include <algorithm>
#include <cmath>

#include "runtime/ddtree/log_softmax.h"

namespace kplan {

OracleDrafter::OracleDrafter(std::vector<int32_t> sequence, int64_t vocab, int64_t depth,
                             double p_correct, uint64_t seed)
    : sequence_(std::move(sequence)),
      vocab_(vocab),
      depth_(depth),
      p_correct_(p_correct),
      seed_(seed),
      random_(seed) {}

Matrix OracleDrafter::propose(int32_t, int32_t bonus_position) {
  Matrix logits(depth_, vocab_);
  for (int64_t d = 1; d <= depth_; ++d) {
    float* row = logits.row(d - 1);
    for (int64_t v = 0; v < vocab_; ++v) row[v] = static_cast<float>(random_.uniform());
    const int64_t position = bonus_position + d;
    const bool known = position < static_cast<int64_t>(sequence_.size());
    const int32_t truth = known ? sequence_[position] : -1;
    int32_t proposed;
    if (known && random_.uniform() < p_correct_) {
      proposed = truth;
    } else {
      do {
        proposed = static_cast<int32_t>(random_.uniform_int(vocab_));
      } while (proposed == truth && vocab_ > 1);
    }
    // Calibrated: the proposed token gets probability p_correct (kept inside (0, 1)), so the
    // tree builder weighs depth against breadth as it would for a drafter that good.
    const double p = std::clamp(p_correct_, 1e-3, 0.999);
    double others = 0.0;
    for (int64_t v = 0; v < vocab_; ++v)
      if (v != proposed) others += std::exp(static_cast<double>(row[v]));
    row[proposed] = static_cast<float>(std::log(p / (1.0 - p) * others));
  }
  log_softmax_rows(logits);
  return logits;
}

}  // namespace kplan
