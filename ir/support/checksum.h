#pragma once
// The plan's checksum: XXH3-64 (xxhash, used header-only).
#include <cstddef>
#include <cstdint>
#include <functional>

namespace kplan {

uint64_t checksum64(const void* data, size_t size);

// The same hash, computed in chunks of `chunk_bytes` (0: one call, no chunks), calling
// `on_chunk(bytes)` after each chunk with the bytes hashed in it: progress over a large buffer
// (a plan's weights) without a call per byte. The result equals checksum64(data, size).
uint64_t checksum64_chunked(const void* data, size_t size, size_t chunk_bytes,
                            const std::function<void(size_t)>& on_chunk);

}  // namespace kplan
