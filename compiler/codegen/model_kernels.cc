#include "compiler/codegen/model_kernels.h"

#include <set>

namespace kplan::codegen {
namespace {

int64_t code(ElemType t) { return static_cast<int64_t>(t); }
constexpr ElemType kF32 = ElemType::F32;

// Appends `k` unless an instance with the same id is already there.
struct KernelList {
  std::vector<KernelSource> list;
  std::set<std::string> ids;
  void add(KernelSource k) {
    if (ids.insert(k.id).second) list.push_back(std::move(k));
  }
};

}  // namespace

KernelSource embedding_kernel(int64_t hidden, ElemType out) {
  return instantiate("embedding", {{"H", hidden}, {"OUT_DT", code(out)}});
}
KernelSource rms_norm_kernel(int64_t d, ElemType x, ElemType y) {
  return instantiate("rms_norm", {{"D", d}, {"X_DT", code(x)}, {"Y_DT", code(y)}});
}
KernelSource matmul_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool weight_kn, bool accumulate) {
  return instantiate("matmul", {{"K", k}, {"N", n}, {"X_DT", code(x)}, {"Y_DT", code(y)},
                                {"W_LAYOUT", weight_kn ? 1 : 0}, {"ACC", accumulate ? 1 : 0}});
}
KernelSource matmul_int4_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool accumulate) {
  return instantiate("matmul_int4", {{"K", k}, {"N", n}, {"X_DT", code(x)}, {"Y_DT", code(y)},
                                     {"ACC", accumulate ? 1 : 0}});
}
KernelSource rope_kernel(int64_t rope_dim, int64_t heads, bool interleaved, ElemType x, ElemType y) {
  return instantiate("rope", {{"ROPE_DIM", rope_dim}, {"HEADS", heads}, {"INTERLEAVED", interleaved ? 1 : 0},
                              {"X_DT", code(x)}, {"Y_DT", code(y)}});
}
KernelSource mla_attention_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv, ElemType out) {
  return instantiate("mla_attention", {{"HEADS", heads}, {"C", kv_lora}, {"R", rope}, {"Q_DT", code(q)},
                                       {"KV_DT", code(kv)}, {"O_DT", code(out)}});
}
KernelSource gqa_attention_kernel(int64_t heads, int64_t kv_heads, int64_t head_dim, ElemType q, ElemType kv, ElemType out) {
  return instantiate("gqa_attention", {{"HEADS", heads}, {"KV_HEADS", kv_heads}, {"D", head_dim},
                                       {"Q_DT", code(q)}, {"KV_DT", code(kv)}, {"O_DT", code(out)}});
}
KernelSource kv_append_kernel(int64_t kv_lora, int64_t rope, ElemType src, ElemType kv) {
  return instantiate("kv_append", {{"C", kv_lora}, {"R", rope}, {"SRC_DT", code(src)}, {"KV_DT", code(kv)}});
}
KernelSource kv_compact_kernel(int64_t kv_lora, int64_t rope, ElemType kv) {
  return instantiate("kv_compact", {{"C", kv_lora}, {"R", rope}, {"KV_DT", code(kv)}});
}
KernelSource moe_router_kernel(const ModelConfig& c) {
  return instantiate("moe_router", {{"E", c.n_routed_experts}, {"TOPK", c.num_experts_per_tok},
                                    {"N_GROUP", c.n_group}, {"TOPK_GROUP", c.topk_group},
                                    {"NORM", c.norm_topk_prob ? 1 : 0}});
}
KernelSource moe_gate_up_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType x) {
  return instantiate("moe_gate_up", {{"H", hidden}, {"I", inter}, {"TOPK", top_k}, {"W_FMT", int4 ? 1 : 0},
                                     {"X_DT", code(x)}});
}
KernelSource moe_down_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType y, bool accumulate) {
  return instantiate("moe_down", {{"H", hidden}, {"I", inter}, {"TOPK", top_k}, {"W_FMT", int4 ? 1 : 0},
                                  {"Y_DT", code(y)}, {"ACC", accumulate ? 1 : 0}});
}
KernelSource swiglu_kernel(int64_t width, ElemType gate, ElemType up, ElemType out) {
  return instantiate("swiglu", {{"I", width}, {"G_DT", code(gate)}, {"U_DT", code(up)}, {"O_DT", code(out)}});
}
KernelSource add_kernel(int64_t d, ElemType a, ElemType b, ElemType out) {
  return instantiate("add", {{"D", d}, {"A_DT", code(a)}, {"B_DT", code(b)}, {"O_DT", code(out)}});
}
KernelSource copy_rows_kernel(int64_t cols, ElemType x, ElemType y) {
  return instantiate("copy_rows", {{"COLS", cols}, {"X_DT", code(x)}, {"Y_DT", code(y)}});
}
KernelSource argmax_kernel(int64_t vocab, ElemType logits) {
  return instantiate("argmax", {{"V", vocab}, {"X_DT", code(logits)}});
}
KernelSource topk_kernel(int64_t vocab, int64_t k, ElemType logits, bool log_probs) {
  return instantiate("topk", {{"V", vocab}, {"K", k}, {"X_DT", code(logits)}, {"LOGPROB", log_probs ? 1 : 0}});
}

std::vector<KernelSource> target_model_kernels(const ModelConfig& c, const StorageChoice& s) {
  const ElemType a = s.activations, kv = s.kv_cache;
  const int64_t hidden = c.hidden_size, heads = c.num_attention_heads;
  const int64_t dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim, lora = c.kv_lora_rank;
  KernelList k;
  k.add(embedding_kernel(hidden, a));
  k.add(rms_norm_kernel(hidden, a, a));  // input / post-attention / final norms
  // Attention: q (optionally through the q_lora bottleneck), the latent kv, rope, cache, absorbed MLA.
  if (c.q_lora_rank) {
    k.add(matmul_kernel(hidden, *c.q_lora_rank, a, a));
    k.add(rms_norm_kernel(*c.q_lora_rank, a, a));
    k.add(matmul_kernel(*c.q_lora_rank, heads * (dn + dr), a, a));
  } else {
    k.add(matmul_kernel(hidden, heads * (dn + dr), a, a));
  }
  k.add(matmul_kernel(hidden, lora + dr, a, a));
  k.add(rms_norm_kernel(lora, a, a));
  k.add(rope_kernel(dr, heads, true, a, a));
  k.add(rope_kernel(dr, 1, true, a, a));
  k.add(kv_append_kernel(lora, dr, a, kv));
  k.add(matmul_kernel(dn, lora, a, a, /*weight_kn=*/true));  // q_nope @ W_UK per head
  k.add(mla_attention_kernel(heads, lora, dr, a, kv, a));
  k.add(matmul_kernel(lora, dv, a, a));  // latent context @ W_UV^T per head
  k.add(matmul_kernel(heads * dv, hidden, a, a, false, /*accumulate=*/true));  // o_proj + residual
  k.add(kv_compact_kernel(lora, dr, kv));
  // MLPs: dense layers, shared experts, routed experts.
  auto swiglu_mlp = [&](int64_t inter) {
    k.add(matmul_kernel(hidden, inter, a, a));
    k.add(swiglu_kernel(inter, a, a, a));
    k.add(matmul_kernel(inter, hidden, a, a, false, /*accumulate=*/true));
  };
  if (c.first_k_dense_replace > 0) swiglu_mlp(c.intermediate_size);
  if (c.n_routed_experts > 0 && c.first_k_dense_replace < c.num_hidden_layers) {
    k.add(matmul_kernel(hidden, c.n_routed_experts, a, kF32));  // router logits in f32, as HF does
    k.add(moe_router_kernel(c));
    if (c.n_shared_experts > 0) swiglu_mlp(c.moe_intermediate_size * c.n_shared_experts);
    const bool int4 = c.quant.enabled;
    k.add(moe_gate_up_kernel(hidden, c.moe_intermediate_size, c.num_experts_per_tok, int4, a));
    k.add(moe_down_kernel(hidden, c.moe_intermediate_size, c.num_experts_per_tok, int4, a, /*accumulate=*/true));
  }
  k.add(add_kernel(hidden, a, a, a));
  // lm_head, then greedy selection.
  k.add(matmul_kernel(hidden, c.vocab_size, a, kF32));
  k.add(argmax_kernel(c.vocab_size, kF32));
  return k.list;
}

std::vector<KernelSource> draft_model_kernels(const DraftConfig& d, const StorageChoice& s, int64_t draft_top_k) {
  const ElemType a = s.activations;
  const int64_t hidden = d.hidden_size, hd = d.head_dim;
  const int64_t n_ids = static_cast<int64_t>(d.target_layer_ids.size());
  KernelList k;
  k.add(matmul_kernel(n_ids * hidden, hidden, a, a));  // fc over the concatenated target features
  k.add(rms_norm_kernel(hidden, a, a));                // hidden_norm, layer norms, final norm
  k.add(matmul_kernel(hidden, d.num_attention_heads * hd, a, a));
  k.add(matmul_kernel(hidden, d.num_key_value_heads * hd, a, a));
  k.add(rms_norm_kernel(hd, a, a));  // q_norm / k_norm per head
  k.add(rope_kernel(hd, d.num_attention_heads, false, a, a));
  k.add(rope_kernel(hd, d.num_key_value_heads, false, a, a));
  k.add(gqa_attention_kernel(d.num_attention_heads, d.num_key_value_heads, hd, a, a, a));
  k.add(matmul_kernel(d.num_attention_heads * hd, hidden, a, a, false, true));
  k.add(matmul_kernel(hidden, d.intermediate_size, a, a));
  k.add(swiglu_kernel(d.intermediate_size, a, a, a));
  k.add(matmul_kernel(d.intermediate_size, hidden, a, a, false, true));
  k.add(copy_rows_kernel(hidden, a, a));
  k.add(topk_kernel(d.vocab_size, draft_top_k, kF32, true));
  return k.list;
}

}  // namespace kplan::codegen
