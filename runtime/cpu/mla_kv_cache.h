#pragma once
// The target's KV state as MLA keeps it: per layer, the normed compressed latent [kv_lora] and
// the rotated rope key [rope] of every position. Rows [0, committed) are committed; a step writes
// its T entries as pending rows [committed, committed + T); commit(keep) moves the kept pending
// rows to the end of the committed ones (compaction), dropping the rest.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/step_model.h"

namespace kplan::cpu {

class MlaKvCache {
 public:
  MlaKvCache(int64_t layers, int64_t capacity, int64_t kv_lora, int64_t rope);

  int64_t capacity() const { return capacity_; }
  int64_t committed() const { return committed_; }
  int64_t pending() const { return pending_; }

  // Opens a step of `tokens` pending rows (replacing any previous pending rows).
  // Throws kplan::Error when committed + tokens exceeds the capacity.
  void begin_step(int64_t tokens);
  Matrix& latent(int64_t layer) { return latent_[layer]; }
  Matrix& rope_key(int64_t layer) { return rope_key_[layer]; }
  const Matrix& latent(int64_t layer) const { return latent_[layer]; }
  const Matrix& rope_key(int64_t layer) const { return rope_key_[layer]; }

  // Keeps pending rows keep[0..n) (distinct step indices, any order) as committed rows
  // committed..committed+n, in that order.
  void commit(std::span<const int32_t> keep);
  void reset();

 private:
  int64_t capacity_;
  int64_t committed_ = 0;
  int64_t pending_ = 0;
  std::vector<Matrix> latent_, rope_key_;
};

}  // namespace kplan::cpu
