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

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

Prng Prng::for_stream(uint64_t seed, std::string_view name) {
  uint64_t mixed = seed;
  mixed = splitmix64_next(mixed) ^ fnv1a64(name);
  return Prng(mixed);
}

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
