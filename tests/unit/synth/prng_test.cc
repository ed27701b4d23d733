// The synth PRNG: known answers (so goldens made from synthetic checkpoints stay valid),
// statistics, and the portable log.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/synth/prng.h"

namespace kplan {
namespace {

TEST(SynthPrng, SplitMix64KnownAnswer) {
  // First outputs of splitmix64 from state 0 (the published reference sequence).
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64_next(state), 0x6E789E6AA1B965F4ull);
}

TEST(SynthPrng, Fnv1aKnownAnswer) {
  EXPECT_EQ(fnv1a64(""), 0xCBF29CE484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xAF63DC4C8601EC8Cull);
}

TEST(SynthPrng, SameSeedSameStreamDifferentOtherwise) {
  Prng a = Prng::for_stream(7, "model.embed_tokens.weight");
  Prng b = Prng::for_stream(7, "model.embed_tokens.weight");
  Prng c = Prng::for_stream(8, "model.embed_tokens.weight");
  Prng d = Prng::for_stream(7, "lm_head.weight");
  bool differs_c = false, differs_d = false;
  for (int i = 0; i < 16; ++i) {
    uint64_t va = a.next_u64();
    EXPECT_EQ(va, b.next_u64());
    differs_c |= va != c.next_u64();
    differs_d |= va != d.next_u64();
  }
  EXPECT_TRUE(differs_c);
  EXPECT_TRUE(differs_d);
}

TEST(SynthPrng, UniformAndNormalStatistics) {
  Prng p(123);
  const int n = 200000;
  double sum = 0, sum2 = 0, usum = 0, umin = 1, umax = 0;
  int beyond3 = 0;
  for (int i = 0; i < n; ++i) {
    double u = p.uniform();
    usum += u;
    umin = std::min(umin, u);
    umax = std::max(umax, u);
    double x = p.normal();
    sum += x;
    sum2 += x * x;
    beyond3 += std::fabs(x) > 3.0;
  }
  EXPECT_GE(umin, 0.0);
  EXPECT_LT(umax, 1.0);
  EXPECT_NEAR(usum / n, 0.5, 0.005);
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum2 / n), 1.0, 0.01);
  EXPECT_NEAR(static_cast<double>(beyond3) / n, 0.0027, 0.0008);  // the normal's 3-sigma tail
}

TEST(SynthPrng, ScaledNormal) {
  Prng a(5), b(5);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.normal(1.0, 0.5), 1.0 + 0.5 * b.normal());
}

TEST(SynthPrng, PortableLogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.001, 0.3, 0.5, 0.70710678, 0.9999999, 1.0, 1.5, 2.0, 10.0, 12345.678})
    EXPECT_NEAR(portable_log(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
  EXPECT_EQ(portable_log(1.0), 0.0);
}

}  // namespace
}  // namespace kplan
