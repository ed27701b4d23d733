#pragma once
// A small seeded pseudo-random stream (xoshiro256**, seeded through splitmix64). Our own
// generator, not std:: distributions, so the same seed gives the same draws on every platform:
// sampled decoding and the random/oracle drafters are reproducible from --seed.
#include <cstdint>

namespace kplan {

class RandomStream {
 public:
  explicit RandomStream(uint64_t seed = 0);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Uniform integer in [0, n); n > 0.
  int64_t uniform_int(int64_t n);

 private:
  uint64_t s_[4];
};

}  // namespace kplan
