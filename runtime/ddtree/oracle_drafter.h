#pragma once
// A drafter for tests and measurements that is told the target's true continuation (e.g. from a
// greedy AR run first): at each depth it proposes the true token at that position with
// probability `p_correct`, else a random other token. The proposed token gets probability
// p_correct (calibrated); the rest share the remainder through small random logits, so a tree
// still has branches beside it.
#include <cstdint>
#include <vector>

#include "runtime/ddtree/random_stream.h"
#include "runtime/step_model.h"

namespace kplan {

class OracleDrafter : public Drafter {
 public:
  // `sequence[pos]`: the token at position pos (prompt then continuation); positions past its
  // end get a random proposal.
  OracleDrafter(std::vector<int32_t> sequence, int64_t vocab, int64_t depth, double p_correct,
                uint64_t seed);
  void observe(std::span<const int32_t>, std::span<const int32_t>,
               const std::vector<Matrix>&) override {}
  Matrix propose(int32_t bonus_token, int32_t bonus_position) override;
  int64_t max_depth() const override { return depth_; }
  void reset() override { random_ = RandomStream(seed_); }

 private:
  std::vector<int32_t> sequence_;
  int64_t vocab_, depth_;
  double p_correct_;
  uint64_t seed_;
  RandomStream random_;
};

}  // namespace kplan
