#pragma once
// The plan's checksum: XXH3-64 (xxhash, used header-only).
#include <cstddef>
#include <cstdint>

namespace kplan {

uint64_t checksum64(const void* data, size_t size);

}  // namespace kplan
