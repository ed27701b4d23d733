#pragma once
// A small seeded pseudo-random stream over the shared xoshiro256** generator (ir/xoshiro256.h).
// Our own generator, not std:: distributions, so the same seed gives the same draws on every
// platform: sampled decoding and the random/oracle drafters are reproducible from --seed.
#include <cstdint>

#include "ir/support/xoshiro256.h"

namespace kplan {

class RandomStream {
 public:
  explicit RandomStream(uint64_t seed = 0) : bits_(seed) {}
  uint64_t next_u64() { return bits_.next_u64(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return bits_.uniform(); }
  // Uniform integer in [0, n); n > 0.
  int64_t uniform_int(int64_t n);

 private:
  Xoshiro256 bits_;
};

}  // namespace kplan
