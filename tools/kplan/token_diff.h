#pragma once
// Where two decodes of one prompt part: the lossless check of `kplan run --compare`, `kplan run
// --spec compare` and `kplan bench --acceptance` (every speculative mode must emit AR's tokens
// exactly). Header-only and pure, so the unit tests check the messages on two token lists without
// faking a decode.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "ir/support/error.h"

namespace kplan::cli {

struct TokenDifference {
  size_t index = 0;                 // first token (0-based) where they part
  std::optional<int32_t> expected;  // the reference's token there; none: the reference ended
  std::optional<int32_t> actual;    // the other decode's token there; none: it ended
};

inline std::optional<TokenDifference> first_difference(std::span<const int32_t> reference,
                                                       std::span<const int32_t> other) {
  for (size_t i = 0; i < reference.size() || i < other.size(); ++i) {
    TokenDifference d;
    d.index = i;
    if (i < reference.size()) d.expected = reference[i];
    if (i < other.size()) d.actual = other[i];
    if (d.expected != d.actual) return d;
  }
  return std::nullopt;
}

// "DDTree budget 16 differs from AR at token 5: 456 where AR has 123" (tokens counted from 1;
// "ended" where one decode stopped first).
inline std::string describe_difference(const std::string& mode, const std::string& reference_mode,
                                       const TokenDifference& d) {
  auto token = [](const std::optional<int32_t>& t) { return t ? std::to_string(*t) : std::string("ended"); };
  const std::string actual = d.actual ? "has " + token(d.actual) : "ended";
  const std::string expected = d.expected ? reference_mode + " has " + token(d.expected) : reference_mode + " ended";
  return mode + " differs from " + reference_mode + " at token " + std::to_string(d.index + 1) + ": " + mode + " " +
         actual + " where " + expected;
}

// How the decodes chose tokens, for the verdicts: "greedy", or "temperature 0.7, seed 3: lossless
// sampling". The comparison is token for token either way: the sampler draws one uniform per
// committed token from one stream seeded by --seed, in every mode, and the walk accepts a node
// only when it is the target's own sample there (runtime/ddtree/token_sampler.h, tree_walk.cc),
// so a seed gives AR's sample in every mode.
inline std::string describe_sampling(double temperature, uint64_t seed) {
  if (!(temperature > 0)) return "greedy";
  char t[32];
  std::snprintf(t, sizeof t, "%g", temperature);
  return "temperature " + std::string(t) + ", seed " + std::to_string(seed) + ": lossless sampling";
}

// The check of `kplan run --compare`: `mode` (e.g. "DDTree budget 16") decoded `tokens` where AR
// decoded `ar` with the same settings (`sampling`: describe_sampling's words). Returns the line
// it prints when they are the same tokens; throws kplan::Error naming the first differing token
// and both decodes' tokens there otherwise.
inline std::string check_same_as_ar(const std::string& mode, std::span<const int32_t> ar,
                                    std::span<const int32_t> tokens, const std::string& sampling) {
  if (const auto d = first_difference(ar, tokens))
    throw Error("--compare: " + describe_difference(mode, "AR", *d) + " (" + sampling + ")");
  return "compare: " + mode + " emits AR's " + std::to_string(ar.size()) + " tokens (" + sampling + ")";
}

}  // namespace kplan::cli
