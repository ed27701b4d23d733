#pragma once
// The IR's op kinds and their text names. ir/OPS.md defines the semantics of each.
#include <cstdint>
#include <optional>
#include <string_view>

namespace kplan::ir {

enum class OpKind : uint8_t {
  // sources, sinks, views
  Weight,        // weight {name, ckpt}
  WeightStack,   // weight_stack {name (with one '*'), count, ckpt}
  Output,        // output(x) {name}
  Slice,         // slice(x) {axis, start, size}
  Reshape,       // reshape(x) -> result type gives the shape
  Transpose,     // transpose(x) {perm}
  Concat,        // concat(x...) {axis}
  // elementwise, norms
  Add,           // add(a, b)
  Swiglu,        // swiglu(gate, up)
  RmsNorm,       // rms_norm(x, w) {eps}
  // matmuls
  Matmul,        // matmul(x, w)            x @ w^T
  MatmulInt4,    // matmul_int4(x, packed, scale) {group_size}
  HeadMatmul,    // head_matmul(x, w)       per head x @ w^T
  LmHead,        // lm_head(x, w)
  Embedding,     // embedding(ids, table)
  // attention
  Rope,                  // rope(x, positions) {theta, interleaved, scaling, ...}
  MlaAttentionExpanded,  // mla_attention_expanded(q_nope, q_rope, k_nope, k_rope, v[, mask]) {scale}
  MlaAttention,          // mla_attention(q_latent, q_rope, kv[, mask]) {scale, kv_lora_rank}
  KvAppend,              // kv_append(cache, parts...)
  KvCompact,             // kv_compact(cache, step, keep)
  GqaAttention,          // gqa_attention(q, k, v) {scale}
  // MoE
  MoeRouter,        // moe_router(logits, bias) {top_k, n_group, topk_group, norm_topk_prob, routed_scaling_factor}
  MoeExperts,       // moe_experts(x, weights, ids, gate, up, down)
  MoeExpertsInt4,   // moe_experts_int4(x, weights, ids, gp, gs, up, us, dp, ds) {group_size}
  // sampling helpers
  Argmax,      // argmax(x)
  TopK,        // topk(x) {k}
  LogSoftmax,  // log_softmax(x)
};

inline constexpr int kNumOpKinds = static_cast<int>(OpKind::LogSoftmax) + 1;

// Text name, e.g. "rms_norm".
std::string_view op_kind_name(OpKind k);
std::optional<OpKind> op_kind_from_name(std::string_view name);

}  // namespace kplan::ir
