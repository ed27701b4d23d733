#pragma once
// compressed-tensors "pack-quantized" INT4 (how K2.6 ships its routed experts), the element math
// every backend shares: 8 values per 32-bit word along the input dim, the first column in the
// low nibble, each stored as q + 8; w[r, c] = (nibble - 8) * scale[r, c / group_size].
#include <cstdint>
#include <cstring>

namespace kplan::int4 {

inline constexpr int kValuesPerWord = 8;
inline constexpr int kZeroPoint = 8;  // stored nibble = q + 8, q in [-8, 7]

// The stored nibble (0..15) of column c within its word (unsigned shift, low nibble first).
inline int nibble(uint32_t word, int64_t c) { return static_cast<int>((word >> (4 * (c % kValuesPerWord))) & 0xFu); }

// The signed value q (-8..7) of column c, read from a row of packed words.
inline int value(const uint32_t* row_words, int64_t c) { return nibble(row_words[c / kValuesPerWord], c) - kZeroPoint; }

// The same, from raw bytes that need not be 4-byte aligned (a mapped checkpoint).
inline int value_unaligned(const uint8_t* row_bytes, int64_t c) {
  uint32_t word;
  std::memcpy(&word, row_bytes + 4 * (c / kValuesPerWord), 4);
  return nibble(word, c) - kZeroPoint;
}

// Packs the signed value q (-8..7) of column c into its word.
inline void set_value(uint32_t& word, int64_t c, int q) {
  const int shift = static_cast<int>(4 * (c % kValuesPerWord));
  word = (word & ~(0xFu << shift)) | (static_cast<uint32_t>(q + kZeroPoint) & 0xFu) << shift;
}

}  // namespace kplan::int4
