#include "runtime/ddtree/random_drafter.h"

#include "runtime/ddtree/log_softmax.h"

namespace kplan {

RandomDrafter::RandomDrafter(int64_t vocab, int64_t depth, uint64_t seed)
    : vocab_(vocab), depth_(depth), seed_(seed), random_(seed) {}

Matrix RandomDrafter::propose(int32_t, int32_t) {
  Matrix logits(depth_, vocab_);
  // A spread of a few nats, so some tokens stand out and the trees branch unevenly.
  for (float& v : logits.data) v = static_cast<float>(4.0 * random_.uniform());
  log_softmax_rows(logits);
  return logits;
}

}  // namespace kplan
