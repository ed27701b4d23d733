#pragma once
// The .kplan file's fixed 64-byte prefix, shared by the writer and the reader:
//   [0, 64)            prefix (below), little-endian
//   [64, 64+fb_size)   the FlatBuffer (schemas/kplan.fbs, root Plan)
//   [data_offset, ..)  weights data section, kDataAlignment-aligned; Weight::offset is relative to it
#include <cstdint>

namespace kplan::plan {

inline constexpr char kMagic[4] = {'K', 'P', 'L', 'N'};
inline constexpr uint64_t kPrefixSize = 64;

struct FilePrefix {
  char magic[4];
  uint32_t format_version;
  uint64_t flatbuffer_size;
  uint64_t data_offset;
  uint64_t data_size;
  uint64_t flatbuffer_checksum;  // XXH3-64 of the FlatBuffer bytes
  uint64_t reserved[2];
  uint64_t prefix_checksum;      // XXH3-64 of the 56 bytes before this field
};
static_assert(sizeof(FilePrefix) == kPrefixSize);

}  // namespace kplan::plan
