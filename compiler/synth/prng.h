#pragma once
// A deterministic random source for `kplan synth`: named streams of the shared xoshiro256**
// generator (ir/xoshiro256.h), and normal samples by Box-Muller (Marsaglia's polar form) with a
// natural log computed here from +, -, *, / only. No std:: distributions and no libm calls,
// whose results differ between standard libraries and CPUs: the same seed gives bit-identical
// weights on every machine.
#include <cstdint>
#include <string_view>

#include "ir/support/xoshiro256.h"

namespace kplan {

// FNV-1a over the bytes of `s`: a stable hash (std::hash is not portable).
uint64_t fnv1a64(std::string_view s);

class Prng {
 public:
  explicit Prng(uint64_t seed) : bits_(seed) {}
  // A generator for one named stream (e.g. a tensor name): independent of every other name,
  // so a tensor's values do not depend on which tensors were generated before it.
  static Prng for_stream(uint64_t seed, std::string_view name);

  uint64_t next_u64() { return bits_.next_u64(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return bits_.uniform(); }
  // Standard normal N(0, 1).
  double normal();
  // mean + stddev * N(0, 1), computed without fused multiply-add.
  double normal(double mean, double stddev);

 private:
  Xoshiro256 bits_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// ln(x) for finite x > 0, to about 1e-15 relative, from basic arithmetic only (see prng.h top).
double portable_log(double x);

}  // namespace kplan
