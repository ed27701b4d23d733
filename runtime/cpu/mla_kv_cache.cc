#include "runtime/cpu/mla_kv_cache.h"

#include <algorithm>
#include <string>

#include "ir/error.h"

namespace kplan::cpu {

MlaKvCache::MlaKvCache(int64_t layers, int64_t capacity, int64_t kv_lora, int64_t rope)
    : capacity_(capacity) {
  for (int64_t l = 0; l < layers; ++l) {
    latent_.emplace_back(capacity, kv_lora);
    rope_key_.emplace_back(capacity, rope);
  }
}

void MlaKvCache::begin_step(int64_t tokens) {
  if (committed_ + tokens > capacity_)
    throw Error("context full: " + std::to_string(committed_) + " cached + " +
                std::to_string(tokens) + " new tokens exceed the maximum context of " +
                std::to_string(capacity_));
  pending_ = tokens;
}

void MlaKvCache::commit(std::span<const int32_t> keep) {
  std::vector<bool> seen(static_cast<size_t>(pending_), false);
  for (int32_t k : keep) {
    if (k < 0 || k >= pending_ || seen[k])
      throw Error("commit: step index " + std::to_string(k) + " is not a distinct pending entry (" +
                  std::to_string(pending_) + " pending)");
    seen[k] = true;
  }
  // Gather first so that moves within the pending range cannot overwrite a later source row.
  for (size_t l = 0; l < latent_.size(); ++l) {
    for (Matrix* m : {&latent_[l], &rope_key_[l]}) {
      std::vector<float> rows;
      rows.reserve(keep.size() * static_cast<size_t>(m->cols));
      for (int32_t k : keep) {
        const float* src = m->row(committed_ + k);
        rows.insert(rows.end(), src, src + m->cols);
      }
      std::copy(rows.begin(), rows.end(), m->row(committed_));
    }
  }
  committed_ += static_cast<int64_t>(keep.size());
  pending_ = 0;
}

void MlaKvCache::reset() {
  committed_ = 0;
  pending_ = 0;
}

}  // namespace kplan::cpu
