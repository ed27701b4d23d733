#include "runtime/gpu/device_layout.h"

#include <algorithm>

#include "ir/support/error.h"
#include "ir/support/int4_frag.h"

namespace kplan::gpu {

int64_t int4_frag_columns(const plan::Weight& w) { return w.shape.empty() ? 0 : int4_frag::columns(w.layout, w.shape.back()); }

namespace {

uint64_t row_bytes_of(const plan::Weight& w) { return w.shape.empty() ? 0 : static_cast<uint64_t>(w.shape.back()) * dtype_size(w.dtype); }

}  // namespace

uint64_t upload_chunk_bytes(const plan::Weight& w, uint64_t max_bytes) {
  if (int4_frag_columns(w) == 0) return max_bytes;
  const uint64_t octet = int4_frag::kOctetRows * row_bytes_of(w);
  return std::max<uint64_t>(octet, max_bytes / octet * octet);
}

void to_device_layout(const plan::Weight& w, std::span<const uint8_t> rows, std::vector<uint8_t>& out) {
  const int64_t k = int4_frag_columns(w);
  const uint64_t row_bytes = row_bytes_of(w);
  const uint64_t n = row_bytes ? rows.size() / row_bytes : 0;
  if (k == 0 || k % int4_frag::kSubColumns != 0)
    throw Error("weight " + w.name + " has layout '" + w.layout + "' but " + std::to_string(k) +
                " columns, not a multiple of 128 (invalid plan)");
  if (n * row_bytes != rows.size() || n % int4_frag::kOctetRows != 0)
    throw Error("weight " + w.name + " (layout '" + w.layout + "'): " + std::to_string(rows.size()) +
                " bytes are not whole octets of its rows (invalid plan)");
  out.resize(rows.size());
  if (w.layout == int4_frag::kWordsLayout) {
    int4_frag::repack_words(reinterpret_cast<const unsigned*>(rows.data()), reinterpret_cast<unsigned*>(out.data()),
                            static_cast<long long>(n), k);
  } else {
    int4_frag::repack_scales(reinterpret_cast<const unsigned short*>(rows.data()), reinterpret_cast<unsigned short*>(out.data()),
                             static_cast<long long>(n), k);
  }
}

}  // namespace kplan::gpu
