#pragma once
// The uniform draws of sampled decoding, one per emitted token: draw k of a decode (k = the
// token's index in the output; the prefill's pick is draw 0) is a pure function of (seed, k).
// Counter-based rather than a sequential stream so a device round can sample every node of a
// tree at once (kernels_templates/ddtree_round.cuh's round_sample): every pick is emitted, so the
// pick at depth d of a round rooted at committed length L takes draw D0 + (L - L0) + d (D0, L0:
// the draws taken and the committed length when the rounds began), whatever the walk did before
// it: draw_index below, the one place the kernel takes it from, equal to the host sampler's count
// (runtime/ddtree/token_sampler.cc).
// The compiler embeds this file beside the kernel templates by name; it includes only
// synthetic_values.h (the same finaliser).
#include "synthetic_values.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KPLAN_DRAW_FN __host__ __device__ __forceinline__
#else
#define KPLAN_DRAW_FN inline
#endif

namespace kplan::draws {

typedef unsigned long long u64;

// Uniform in [0, 1) with 53 bits: splitmix64's finaliser over a key of the seed plus the
// counter (exact integer work, so host and device draw the same bits).
KPLAN_DRAW_FN double uniform(u64 seed, u64 index) {
  const u64 key = synthetic::mix64(seed ^ 0x6A09E667F3BCC909ull);
  return static_cast<double>(synthetic::mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull) >> 11) *
         (1.0 / 9007199254740992.0);
}

// The draw of the pick at depth `depth` of a round rooted at committed length `length`, where
// base = (draws taken when the rounds began) - (the committed length then): every round's picks
// are all emitted, so the count of draws grows with the committed length.
KPLAN_DRAW_FN u64 draw_index(long long base, long long length, int depth) {
  return static_cast<u64>(base + length + depth);
}

}  // namespace kplan::draws
