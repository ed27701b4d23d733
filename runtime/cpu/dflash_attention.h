#pragma once
// The DFlash drafter's attention core: every query attends every key (non-causal; with a
// context window only the last N context keys and its own rows, OPS gqa_attention), grouped-query
// (query head h reads kv head h / (q_heads / kv_heads)), scale head_dim^-0.5, as z-lab's
// Qwen3DFlashAttention runs it with is_causal=False and no mask.
#include <cstdint>

#include "runtime/step_model.h"

namespace kplan::cpu {

// q [T, Hq*D], k and v [S, Hkv*D] -> [T, Hq*D].
// context_window N > 0 (OPS gqa_attention {context_window}): the last T keys are the queries' own
// rows, the S - T before them the context, and only keys j >= max(0, S - T - N) are seen;
// 0: every key. Throws when N < 0 or S < T with a window.
Matrix gqa_attention_full(const Matrix& q, const Matrix& k, const Matrix& v, int64_t q_heads,
                          int64_t kv_heads, int64_t head_dim, float scale, int64_t context_window = 0);

}  // namespace kplan::cpu
