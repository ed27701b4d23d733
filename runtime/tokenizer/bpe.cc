#include "runtime/tokenizer/bpe.h"

#include <cstdio>
#include <limits>

#include "ir/support/error.h"

namespace kplan::tokenizer {
namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

int32_t rank_of(const RankMap& ranks, std::string_view bytes) {
  const auto it = ranks.find(bytes);
  return it == ranks.end() ? kNoRank : it->second;
}

}  // namespace

void byte_pair_encode(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out) {
  if (piece.empty()) return;
  if (const int32_t whole = rank_of(ranks, piece); whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  // Part boundaries (start offsets, plus one at the end) and, for each part, the rank of it
  // merged with the next part (kNoRank when that pair is not a token).
  struct Part {
    size_t start;
    int32_t pair_rank;
  };
  std::vector<Part> parts;
  parts.reserve(piece.size() + 1);
  for (size_t i = 0; i <= piece.size(); ++i) parts.push_back({i, kNoRank});
  auto pair_rank = [&](size_t i) {
    if (i + 2 >= parts.size()) return kNoRank;
    return rank_of(ranks, piece.substr(parts[i].start, parts[i + 2].start - parts[i].start));
  };
  for (size_t i = 0; i + 2 < parts.size(); ++i) parts[i].pair_rank = pair_rank(i);

  while (parts.size() > 2) {
    size_t best = 0;
    int32_t best_rank = kNoRank;
    for (size_t i = 0; i + 2 < parts.size(); ++i)
      if (parts[i].pair_rank < best_rank) best_rank = parts[i].pair_rank, best = i;
    if (best_rank == kNoRank) break;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    parts[best].pair_rank = pair_rank(best);
    if (best > 0) parts[best - 1].pair_rank = pair_rank(best - 1);
  }

  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string_view token = piece.substr(parts[i].start, parts[i + 1].start - parts[i].start);
    const int32_t id = rank_of(ranks, token);
    if (id == kNoRank) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(token[0]));
      throw Error(std::string("tokenizer: byte ") + hex + " has no rank in tiktoken.model (it needs all 256 single bytes)");
    }
    out.push_back(id);
  }
}

}  // namespace kplan::tokenizer
