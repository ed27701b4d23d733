#include "compiler/synth/prng.h"

#include <cmath>

// A fused multiply-add rounds once where a * b + c rounds twice; letting the compiler contract
// on one CPU and not another would break bit-identical output, so contraction is off here.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace kplan {

uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

Prng::Prng(uint64_t seed) {
  uint64_t sm = seed;
  for (uint64_t& word : s_) word = splitmix64_next(sm);
}

Prng Prng::for_stream(uint64_t seed, std::string_view name) {
  uint64_t mixed = seed;
  mixed = splitmix64_next(mixed) ^ fnv1a64(name);
  return Prng(mixed);
}

namespace {
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

uint64_t Prng::next_u64() {
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

double Prng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Prng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Polar Box-Muller: a point uniform in the unit disc gives two independent normals.
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * portable_log(s) / s);  // sqrt is exactly rounded (IEEE)
  spare_ = v * factor;
  has_spare_ = true;
  return u * factor;
}

double Prng::normal(double mean, double stddev) { return mean + stddev * normal(); }

double portable_log(double x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln(m) = 2 atanh(z), z = (m-1)/(m+1), |z| < 0.172.
  // frexp and ldexp are exact bit manipulations.
  int e = 0;
  double m = std::frexp(x, &e);  // m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  const double z = (m - 1.0) / (m + 1.0);
  const double z2 = z * z;
  double term = z, sum = 0.0;
  for (int k = 1; k <= 39; k += 2) {  // z^40 < 1e-30: far below double precision
    sum += term / k;
    term *= z2;
  }
  constexpr double kLn2 = 0.69314718055994530942;
  return 2.0 * sum + e * kLn2;
}

}  // namespace kplan
