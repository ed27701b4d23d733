#include "runtime/tokenizer/bpe.h"

#include <cstdio>
#include <limits>
#include <queue>

#include "ir/support/error.h"

namespace kplan::tokenizer {
namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

int32_t rank_of(const RankMap& ranks, std::string_view bytes) {
  const auto it = ranks.find(bytes);
  return it == ranks.end() ? kNoRank : it->second;
}

void push_token(std::string_view token, const RankMap& ranks, std::vector<int32_t>& out) {
  const int32_t id = rank_of(ranks, token);
  if (id == kNoRank) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(token[0]));
    throw Error(std::string("tokenizer: byte ") + hex + " has no rank in tiktoken.model (it needs all 256 single bytes)");
  }
  out.push_back(id);
}

// Pieces longer than this merge through the heap: the scan is quadratic in the piece's length (a
// 40,000-byte word took minutes), the heap O(n log n); both give tiktoken's result.
constexpr size_t kLongPiece = 256;

}  // namespace

void byte_pair_encode(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out) {
  if (piece.empty()) return;
  if (const int32_t whole = rank_of(ranks, piece); whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (piece.size() > kLongPiece)
    byte_pair_encode_heap(piece, ranks, out);
  else
    byte_pair_encode_scan(piece, ranks, out);
}

void byte_pair_encode_scan(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out) {
  if (piece.empty()) return;
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

  for (size_t i = 0; i + 1 < parts.size(); ++i)
    push_token(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start), ranks, out);
}

void byte_pair_encode_heap(std::string_view piece, const RankMap& ranks, std::vector<int32_t>& out) {
  const size_t n = piece.size();
  if (n == 0) return;
  // Parts as a linked list over their start offsets 0..n-1 (n marks the end). A heap holds each
  // adjacent pair as (rank, start of its left part): the top is the lowest rank, leftmost among
  // equals, which is the pair the scan picks. Entries of pairs that changed are left in the heap
  // and skipped when popped (their version no longer matches).
  std::vector<size_t> next(n), prev(n);
  std::vector<uint32_t> version(n, 0);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i == 0 ? n : i - 1;
  struct Entry {
    int32_t rank;
    size_t start;
    uint32_t version;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto push_pair = [&](size_t i) {
    if (i >= n || next[i] >= n) return;
    const size_t end = next[next[i]];
    if (const int32_t r = rank_of(ranks, piece.substr(i, end - i)); r != kNoRank) heap.push({r, i, version[i]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    if (!alive[e.start] || e.version != version[e.start]) continue;
    const size_t right = next[e.start];
    alive[right] = false;
    next[e.start] = next[right];
    if (next[right] < n) prev[next[right]] = e.start;
    ++version[e.start];
    push_pair(e.start);
    if (prev[e.start] < n) {
      ++version[prev[e.start]];
      push_pair(prev[e.start]);
    }
  }
  for (size_t i = 0; i < n; i = next[i]) push_token(piece.substr(i, next[i] - i), ranks, out);
}

}  // namespace kplan::tokenizer
