#pragma once
// Where two decodes of one prompt part: the lossless check of `kplan run --spec compare` and
// `kplan bench --acceptance` (every speculative mode must emit AR's tokens exactly). Header-only
// and pure, so the unit tests check the message without faking a decode.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

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

}  // namespace kplan::cli
