#include "compiler/codegen/model_kernels.h"

#include <set>

#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::codegen {
namespace {

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

std::vector<KernelSource> target_model_kernels(const ModelConfig& c, const StorageChoice& s) {
  const ElemType a = s.activations, kv = s.kv_cache;
  const int64_t hidden = c.hidden_size, heads = c.num_attention_heads;
  const int64_t dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim, lora = c.kv_lora_rank;
  KernelList k;
  k.add(embedding_kernel(hidden, a));
  k.add(rms_norm_kernel(hidden, a, a));  // input / post-attention / final norms
  k.add(embedding_norm_kernel(hidden, a, a));  // the gather in the first norm's launch (compiler/passes/embedding_norm.h)
  // Attention: q (optionally through the q_lora bottleneck), the latent kv, rope, cache, absorbed MLA.
  if (c.q_lora_rank) {
    k.add(matmul_kernel(hidden, *c.q_lora_rank, a, a));
    k.add(rms_norm_kernel(*c.q_lora_rank, a, a));
    k.add(matmul_kernel(*c.q_lora_rank, heads * (dn + dr), a, a));
  } else {
    k.add(matmul_kernel(hidden, heads * (dn + dr), a, a));
  }
  k.add(matmul_kernel(hidden, lora + dr, a, a));
  // q_a (or q) and kv_a in one launch (compiler/passes/sibling_matmuls.h), a 1-token step's, with
  // the layer norm in it (compiler/passes/norm_matmuls.h: NORM 1 reads the residual stream); q_b
  // with q_a's norm.
  k.add(matmul_siblings_kernel(hidden, c.q_lora_rank ? *c.q_lora_rank : heads * (dn + dr), lora + dr, 0, a, a, kDefaultArch, 1));
  k.add(matmul_siblings_kernel(hidden, c.q_lora_rank ? *c.q_lora_rank : heads * (dn + dr), lora + dr, 0, kF32, a, kDefaultArch, 1, false,
                               /*norm=*/1));
  if (c.q_lora_rank) k.add(matmul_kernel(*c.q_lora_rank, heads * (dn + dr), a, a, false, false, kDefaultArch, 0, 1, 0, /*norm=*/1));
  k.add(rms_norm_kernel(lora, a, a));
  k.add(rope_kernel(dr, heads, true, a, a));
  k.add(rope_kernel(dr, 1, true, a, a));
  k.add(kv_append_kernel(lora, dr, a, kv));
  // kv_a_layernorm, both ropes and the append in one launch (compiler/passes/rope_append.h).
  k.add(mla_rope_append_kernel(lora, dr, heads, true, a, a, kv));
  k.add(matmul_kernel(dn, lora, a, a, /*weight_kn=*/true));  // q_nope @ W_UK per head
  // W_UK's launch with the rope-append's blocks after its own (compiler/passes/uk_rope_append.h).
  k.add(uk_rope_append_kernel(matmul_kernel(dn, lora, a, a, /*weight_kn=*/true), lora, dr, heads, true, a, kv));
  k.add(mla_attention_kernel(heads, lora, dr, a, kv, a));
  k.add(mla_split_partial_kernel(heads, lora, dr, a, kv));  // the split-context pair the op lowers to
  k.add(mla_split_combine_kernel(heads, lora, a));
  k.add(matmul_kernel(lora, dv, a, a));  // latent context @ W_UV^T per head
  k.add(matmul_kernel(heads * dv, hidden, a, a, false, /*accumulate=*/true));  // o_proj + residual
  k.add(kv_compact_kernel(lora, dr, kv));
  // MLPs: dense layers, shared experts, routed experts.
  auto swiglu_mlp = [&](int64_t inter) {
    k.add(matmul_kernel(hidden, inter, a, a));
    k.add(swiglu_kernel(inter, a, a, a));
    k.add(matmul_kernel(inter, hidden, a, a, false, /*accumulate=*/true));
  };
  if (c.first_k_dense_replace > 0) {
    swiglu_mlp(c.intermediate_size);
    // gate, up and their swiglu in one launch (GLU 1), a 1-token step's.
    k.add(matmul_siblings_kernel(hidden, 0, c.intermediate_size, c.intermediate_size, a, a, kDefaultArch, 1, /*glu=*/true));
  }
  if (c.n_routed_experts > 0 && c.first_k_dense_replace < c.num_hidden_layers) {
    k.add(matmul_kernel(hidden, c.n_routed_experts, a, kF32));  // router logits in f32, as HF does
    k.add(moe_router_kernel(c));
    if (c.n_shared_experts > 0) {
      swiglu_mlp(c.moe_intermediate_size * c.n_shared_experts);
      // The router beside the shared expert's gate and up, their swiglu in the launch (GLU 1).
      const int64_t shared = c.moe_intermediate_size * c.n_shared_experts;
      if (c.n_routed_experts % 2 == 0) {
        k.add(matmul_siblings_kernel(hidden, c.n_routed_experts, shared, shared, a, a, kDefaultArch, 1, /*glu=*/true));
        // With the layer's norm in it, stored for the routed experts (NORM 2).
        k.add(matmul_siblings_kernel(hidden, c.n_routed_experts, shared, shared, kF32, a, kDefaultArch, 1, /*glu=*/true, /*norm=*/2));
      }
      // The shared expert's down projection doing the MoE combine (epilogue_adds.h: ROUTED).
      k.add(matmul_kernel(shared, hidden, a, a, false, /*accumulate=*/true, kDefaultArch, 0, 1, 0, 0, c.num_experts_per_tok));
    }
    const bool int4 = c.quant.enabled;
    const int64_t inter = c.moe_intermediate_size, experts = c.n_routed_experts, top_k = c.num_experts_per_tok;
    const int64_t layout = int4 ? moe_int4_layout(hidden, inter) : 0;  // as the lowering lays the INT4 weights out
    const ParamValues xb = moe_experts_tuning(int4, a == ElemType::BF16);  // as op_rules.cc instantiates them
    k.add(moe_grouped_gate_up_kernel(hidden, inter, experts, top_k, int4, a, kDefaultArch, xb, {}, layout));
    k.add(moe_grouped_down_kernel(hidden, inter, experts, top_k, int4, kDefaultArch, xb, layout));
    k.add(moe_combine_kernel(hidden, top_k, a, /*accumulate=*/true));  // a MoE layer without a shared expert
  }
  k.add(add_kernel(hidden, a, a, a));
  k.add(add_norm_kernel(hidden, a, a, kF32, a));  // the first layer's add and its post-attention norm (compiler/passes/add_norm.h)
  // lm_head (with the final norm in its launch, a 1-token step's), then greedy selection.
  k.add(matmul_kernel(hidden, c.vocab_size, a, kF32));
  k.add(matmul_kernel(hidden, c.vocab_size, kF32, kF32, false, false, kDefaultArch, 0, 1, 0, /*norm=*/1));
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
