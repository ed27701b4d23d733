#include "ir/support/checksum.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kplan {

uint64_t checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

uint64_t checksum64_chunked(const void* data, size_t size, size_t chunk_bytes,
                            const std::function<void(size_t)>& on_chunk) {
  if (chunk_bytes == 0 || size <= chunk_bytes) {
    const uint64_t h = XXH3_64bits(data, size);
    if (on_chunk) on_chunk(size);
    return h;
  }
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t at = 0; at < size; at += chunk_bytes) {
    const size_t n = std::min(chunk_bytes, size - at);
    XXH3_64bits_update(&state, p + at, n);
    if (on_chunk) on_chunk(n);
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace kplan
