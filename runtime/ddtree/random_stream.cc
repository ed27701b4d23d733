#include "runtime/ddtree/random_stream.h"

namespace kplan {

int64_t RandomStream::uniform_int(int64_t n) {
  // Rejection keeps the draw exactly uniform for any n.
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % un;
  uint64_t v;
  do {
    v = next_u64();
  } while (v >= limit);
  return static_cast<int64_t>(v % un);
}

}  // namespace kplan
