#pragma once
// The INT4 experts' "frag" device layout: where the GPU keeps a packed INT4 matrix (and its bf16
// group scales) so that one warp step of the tensor-core MoE kernels (kernels_templates/
// moe_grouped.cuh, W_LAYOUT 1) reads contiguous bytes and needs no transposition. The plan keeps
// the checkpoint's bytes (compressed-tensors pack-quantized, ir/support/int4.h: [rows, K / 8]
// words, [rows, K / 32] bf16 scales, row-major) and records the layout on the weight; the GPU
// runtime lays them out so at load (the upload permutes, the synthetic generator writes there).
//
// Why: in the checkpoint layout a warp step reads 128 bytes of each of 16 rows whose starts lie
// K / 2 bytes apart, and the m16n8k16 A fragment wants lane (g, q) to hold word q of each group of
// rows g and g + 8, so the kernels staged every 16-byte load through shared memory and ldmatrix.
// Here the matrix is cut into octets of 8 rows and sub-blocks of 128 columns (4 groups of 32);
// an octet's sub-block is 512 contiguous bytes: lane l = 4 g + q holds the 16 bytes {word q of
// group 0, 1, 2, 3 of the sub-block} of row g, i.e. exactly its A-fragment words. A warp's step
// (16 rows x 256 columns) is then two or four 512-byte runs, one 16-byte load a lane each.
// The scales: per octet and sub-block, 8 rows x 4 bf16 (64 bytes), row g's at 4 g.
// Offsets are in the unit of the tensor (32-bit words / bf16 scales) from the matrix's start;
// rows may run over stacked experts (E * rows) as long as each expert's rows are whole octets.
// Written for host and device; the compiler embeds it beside the kernel templates.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KPLAN_FRAG_FN __host__ __device__ __forceinline__
#else
#include <cstdint>
#define KPLAN_FRAG_FN inline
#endif

namespace kplan::int4_frag {

constexpr int kOctetRows = 8;    // rows a fragment octet holds (an m16 tile's g or g + 8 half)
constexpr int kSubColumns = 128; // columns a sub-block holds: 4 groups of 32
constexpr int kSubWords = 128;   // 32-bit words an octet's sub-block holds (512 bytes)
constexpr int kSubScales = 32;   // bf16 scales an octet's sub-block holds (64 bytes)

// Whether a matrix of `rows` (per expert) by `k` columns can take the layout (groups of 32).
KPLAN_FRAG_FN bool fits(long long rows, long long k, int group) {
  return group == 32 && rows % kOctetRows == 0 && k % kSubColumns == 0;
}

// The frag offset of checkpoint word `w` (words of 8 columns, row-major, K / 8 a row).
KPLAN_FRAG_FN long long word_offset(long long w, long long k) {
  const long long words = k / 8, row = w / words, c = w % words;  // c: the word within the row
  const long long group = c / 4, q = c % 4, sub = group / 4, i = group % 4;
  return ((row / kOctetRows * (k / kSubColumns) + sub) * 32 + (row % kOctetRows) * 4 + q) * 4 + i;
}

// The frag offset of checkpoint scale `s` (groups of 32 columns, row-major, K / 32 a row).
KPLAN_FRAG_FN long long scale_offset(long long s, long long k) {
  const long long groups = k / 32, row = s / groups, group = s % groups;
  return ((row / kOctetRows * (k / kSubColumns) + group / 4) * kOctetRows + row % kOctetRows) * 4 + group % 4;
}

// The first word / scale of sub-block `sub` of the octet holding `row` (a multiple of 8 apart).
KPLAN_FRAG_FN long long sub_block_words(long long row, long long sub, long long k) {
  return (row / kOctetRows * (k / kSubColumns) + sub) * kSubWords;
}
KPLAN_FRAG_FN long long sub_block_scales(long long row, long long sub, long long k) {
  return (row / kOctetRows * (k / kSubColumns) + sub) * kSubScales;
}

#if !defined(__CUDACC_RTC__)
}  // namespace kplan::int4_frag
#include <string_view>
namespace kplan::int4_frag {

// The plan's layout names (a weight's `layout`: its bytes stay the checkpoint's stacked rows, the
// device copy is in this order), and the matrix's columns from the weight's last dim (0: another
// layout).
constexpr std::string_view kWordsLayout = "int4_frag", kScalesLayout = "int4_frag_scales";
inline long long columns(std::string_view layout, long long last_dim) {
  return layout == kWordsLayout ? 8 * last_dim : layout == kScalesLayout ? 32 * last_dim : 0;
}

// Host: `rows` rows (whole octets) of packed words / scales of a K-column matrix into frag order
// (dst and src do not overlap; row r0 of a larger matrix may start them if r0 % 8 == 0: the
// octets' bytes keep their rows' byte range). dst is written in order, octet by octet and
// sub-block by sub-block: 4.8 GB/s on one core of the 2-core CI machine, against 0.8 GB/s for a
// word_offset per word (its divisions), which would add ~11 minutes to loading K2.6's experts.
inline void repack_words(const unsigned* src, unsigned* dst, long long rows, long long k) {
  const long long words = k / 8, subs = k / kSubColumns;
  for (long long o = 0; o < rows / kOctetRows; ++o)
    for (long long sb = 0; sb < subs; ++sb)
      for (long long g = 0; g < kOctetRows; ++g) {
        const unsigned* row = src + (o * kOctetRows + g) * words + 16 * sb;  // the sub-block's 4 groups of 4 words
        for (long long q = 0; q < 4; ++q)
          for (long long i = 0; i < 4; ++i) *dst++ = row[4 * i + q];
      }
}
inline void repack_scales(const unsigned short* src, unsigned short* dst, long long rows, long long k) {
  const long long groups = k / 32, subs = k / kSubColumns;
  for (long long o = 0; o < rows / kOctetRows; ++o)
    for (long long sb = 0; sb < subs; ++sb)
      for (long long g = 0; g < kOctetRows; ++g)
        for (long long i = 0; i < 4; ++i) *dst++ = src[(o * kOctetRows + g) * groups + 4 * sb + i];
}
#endif

}  // namespace kplan::int4_frag
