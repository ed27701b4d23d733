#pragma once
// xoshiro256** (Blackman & Vigna), seeded through splitmix64: the one bit generator behind
// `kplan synth` weights (compiler/synth/prng.h) and seeded decoding (runtime/ddtree/
// random_stream.h). Integer operations only, so a seed gives the same stream on every machine;
// changing anything here changes synthesised checkpoints and their golden hashes.
#include <cstdint>

namespace kplan {

// One step of splitmix64: advances `state` and returns a well-mixed 64-bit value.
inline uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& word : s_) word = splitmix64_next(seed);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits (the conversion and scaling are exact).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace kplan
