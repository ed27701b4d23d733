#pragma once
// Rotary position embedding, plain or YaRN-scaled, computed the way transformers does
// (modeling_rope_utils: inv_freq in fp32; cos/sin of inv_freq * position, times the YaRN
// attention factor). Two layouts of the rotated pairs:
// - interleaved (GPT-J, adjacent pairs (x[2i], x[2i+1])): DeepSeek-V3's checkpoint layout.
//   transformers (rope_interleave=True) first de-interleaves to [evens | odds] and rotates halves;
//   we rotate the adjacent pairs in place instead. Both q and k get the same permutation there,
//   so every q.k dot product, and thus attention, is identical; only the cached rope-key layout
//   differs (ours keeps the checkpoint's).
// - rotate_half (GPT-NeoX, pairs (x[i], x[i + dim/2])): Qwen3, hence the DFlash drafter.
#include <cstdint>
#include <optional>
#include <vector>

#include "schemas/model_spec.h"

namespace kplan::cpu {

class Rope {
 public:
  // `dim`: rotated width (DeepSeek: qk_rope_head_dim; Qwen3: head_dim). `max_position_embeddings`
  // is only a fallback for YaRN's original length when the config lacks it. `attention_factor`
  // overrides the one derived from the scaling (the IR's rope op carries it precomputed).
  Rope(int64_t dim, double theta, const RopeScaling& scaling, int64_t max_position_embeddings,
       std::optional<double> attention_factor = std::nullopt);

  // From frequencies already computed (dim = 2 * inv_freq.size()): what a kernel launch carries.
  Rope(std::vector<float> inv_freq, float attention_factor);

  int64_t dim() const { return dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // The factor cos and sin are multiplied by (YaRN's attention_factor; 1 for plain RoPE).
  float attention_factor() const { return attention_factor_; }

  // cos/sin of each frequency at `position` (dim/2 values each), attention factor applied.
  void cos_sin(int64_t position, float* cos, float* sin) const;
  // Rotates x[0..dim) in place.
  void apply_interleaved(float* x, int64_t position) const;
  void apply_rotate_half(float* x, int64_t position) const;

 private:
  void init(double theta, const RopeScaling& scaling, int64_t max_position_embeddings);
  int64_t dim_;
  std::vector<float> inv_freq_;
  float attention_factor_ = 1.0f;
};

}  // namespace kplan::cpu
