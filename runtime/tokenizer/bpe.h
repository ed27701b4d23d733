#pragma once
// Byte-pair encoding of one pre-tokenized piece against tiktoken's mergeable ranks: start from
// single bytes and repeatedly merge the adjacent pair whose concatenation has the lowest rank.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kplan::tokenizer {

// Hash and equality that accept std::string_view keys, so lookups need no string copies.
struct BytesHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using RankMap = std::unordered_map<std::string, int32_t, BytesHash, std::equal_to<>>;

// Appends the ids of `piece` to `out`. Throws kplan::Error when a byte of the piece has no rank.
void byte_pair_encode(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out);

// The two ways byte_pair_encode merges (tests hold them equal): a scan for the lowest-rank pair
// per merge (quadratic; fastest for the short pieces of ordinary text) and a heap of pairs
// (O(n log n); for long pieces, e.g. a base64 blob or a long run of one letter).
void byte_pair_encode_scan(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out);
void byte_pair_encode_heap(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out);

}  // namespace kplan::tokenizer
