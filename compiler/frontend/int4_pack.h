#pragma once
// compressed-tensors "pack-quantized" INT4 for one Linear weight [out, in] (how K2.6 ships its
// routed experts): symmetric, one bf16 scale per group of `group_size` input columns, each value
// stored as q+8 in 4 bits, 8 per int32 along the input dim, first column in the low nibble.
// Dequantised w[r, c] = (nibble - 8) * scale[r, c / group_size].
#include <cstdint>
#include <span>
#include <vector>

namespace kplan {

struct PackedInt4 {
  int64_t out = 0, in = 0, group_size = 32;
  std::vector<int32_t> packed;   // [out, in / 8]
  std::vector<uint16_t> scale;   // bf16 bits, [out, in / group_size]
};

// Quantises like compressed-tensors' symmetric minmax observer: scale = max|w| / 7.5 over each
// group (bit range 15 halved), rounded to bf16, then q = clamp(round_half_even(w / scale), -8, 7)
// against that bf16 scale, so unpacking reproduces exactly what a consumer dequantises.
// `in` must be a multiple of 8 and of group_size.
PackedInt4 pack_int4(std::span<const float> weight, int64_t out, int64_t in, int64_t group_size = 32);
// Dequantises to fp32 [out, in] (exact: a small integer times a bf16 scale).
std::vector<float> unpack_int4(const PackedInt4& p);
// The signed 4-bit value (-8..7) of w[r, c].
int unpacked_int4_value(const PackedInt4& p, int64_t r, int64_t c);

}  // namespace kplan
