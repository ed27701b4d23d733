#pragma once
// A drafter that knows nothing: every depth gets seeded random logits (log-softmax-normalised).
// It exercises trees of any shape and acceptance near chance; lossless decoding must still give
// exactly the AR output.
#include <cstdint>

#include "runtime/ddtree/random_stream.h"
#include "runtime/step_model.h"

namespace kplan {

class RandomDrafter : public Drafter {
 public:
  RandomDrafter(int64_t vocab, int64_t depth, uint64_t seed);
  void observe(std::span<const int32_t>, std::span<const int32_t>,
               const std::vector<Matrix>&) override {}
  Matrix propose(int32_t bonus_token, int32_t bonus_position) override;
  int64_t max_depth() const override { return depth_; }
  void reset() override { random_ = RandomStream(seed_); }

 private:
  int64_t vocab_, depth_;
  uint64_t seed_;
  RandomStream random_;
};

}  // namespace kplan
