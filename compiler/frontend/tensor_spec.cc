#include "compiler/frontend/tensor_spec.h"

#include "ir/support/error.h"

namespace kplan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Sums and products of config numbers, checked: the config is untrusted, and 2^62 heads times a
// head dim wrapped int64 (undefined behaviour) into a shape that looked like any other.
int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw Error("config.json: " + what + " = " + std::to_string(a) + " + " + std::to_string(b) +
                " overflows a 64-bit integer");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error("config.json: " + what + " = " + std::to_string(a) + " x " + std::to_string(b) +
                " overflows a 64-bit integer");
  return r;
}

class SpecList {
 public:
  explicit SpecList(const ModelConfig* quant_source) : cfg_(quant_source) {}

  void plain(std::string name, std::vector<int64_t> shape, DType dtype = DType::BF16) {
    push({std::move(name), dtype, std::move(shape), TensorRole::Plain, "", {}});
  }
  void widen_last() { specs_.back().widen_floats = true; }

  // A bias-free nn.Linear(in, out) named `module`: weight [out, in] in bf16, or the three
  // compressed-tensors pack-quantized parts when the config quantizes this module.
  void linear(const std::string& module, int64_t out, int64_t in) {
    if (cfg_ && is_quantized(cfg_->quant, module)) {
      const int64_t group = cfg_->quant.group_size;
      push({module + ".weight_packed", DType::I32, {out, ceil_div(in, 8)}, TensorRole::PackedInt4, module, {out, in}});
      push({module + ".weight_scale", DType::BF16, {out, ceil_div(in, group)}, TensorRole::PackedScale, module, {out, in}});
      push({module + ".weight_shape", DType::I32, {2}, TensorRole::PackedShape, module, {out, in}});
    } else {
      push({module + ".weight", DType::BF16, {out, in}, TensorRole::Plain, module, {out, in}});
    }
  }

  // SwiGLU MLP (gate_proj, up_proj, down_proj) of the given width.
  void mlp(const std::string& prefix, int64_t hidden, int64_t intermediate) {
    linear(prefix + ".gate_proj", intermediate, hidden);
    linear(prefix + ".up_proj", intermediate, hidden);
    linear(prefix + ".down_proj", hidden, intermediate);
  }

  std::vector<TensorSpec> take() { return std::move(specs_); }

 private:
  // Every tensor's byte size must be a 64-bit number (the frontend, synth and the IR builder
  // multiply the dims out); a config whose dims overflow it is refused naming the tensor.
  void push(TensorSpec spec) {
    int64_t bytes = static_cast<int64_t>(dtype_size(spec.dtype));
    for (int64_t d : spec.shape)
      if (__builtin_mul_overflow(bytes, d, &bytes)) {
        std::string shape;
        for (int64_t x : spec.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(x);
        throw Error("config.json: tensor " + spec.name + " of shape [" + shape +
                    "] would hold more than 2^63 bytes");
      }
    specs_.push_back(std::move(spec));
  }

  const ModelConfig* cfg_;
  std::vector<TensorSpec> specs_;
};

}  // namespace

// Names and shapes follow HuggingFace transformers' DeepseekV3ForCausalLM.
namespace {

// The most tensors a checkpoint may name (K2.6: about 70,000 expert projections, three tensors
// each once INT4-packed). A config past it is refused by field before the list is built: 10^8
// experts would otherwise allocate the names of 10^9 tensors ("out of host memory" after 8 GB).
constexpr int64_t kMaxCheckpointTensors = 4'000'000;

void refuse_giant_expert_lists(const ModelConfig& c) {
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.is_moe_layer(l) ? 1 : 0;
  const __int128 tensors = static_cast<__int128>(moe_layers) * c.n_routed_experts * 9;  // 3 projections, 3 INT4 parts
  if (tensors > kMaxCheckpointTensors)
    throw Error("config.json: n_routed_experts " + std::to_string(c.n_routed_experts) + " in " +
                std::to_string(moe_layers) + " MoE layers names more than " + std::to_string(kMaxCheckpointTensors) +
                " expert tensors, more than kplan reads from one checkpoint (Kimi K2.6 names about 210,000)");
}

}  // namespace

std::vector<TensorSpec> target_tensor_specs(const ModelConfig& c) {
  refuse_giant_expert_lists(c);
  SpecList s(&c);
  const std::string& p = c.tensor_prefix;
  const int64_t h = c.hidden_size;
  const int64_t heads = c.num_attention_heads;
  const int64_t qk_head_dim = checked_add(c.qk_nope_head_dim, c.qk_rope_head_dim, "qk_head_dim (qk_nope_head_dim + qk_rope_head_dim)");
  const int64_t q_rows = checked_mul(heads, qk_head_dim, "num_attention_heads x qk_head_dim");
  const int64_t kv_a_rows = checked_add(c.kv_lora_rank, c.qk_rope_head_dim, "kv_lora_rank + qk_rope_head_dim");
  const int64_t kv_b_rows = checked_mul(heads, checked_add(c.qk_nope_head_dim, c.v_head_dim, "qk_nope_head_dim + v_head_dim"),
                                        "num_attention_heads x (qk_nope_head_dim + v_head_dim)");
  const int64_t o_cols = checked_mul(heads, c.v_head_dim, "num_attention_heads x v_head_dim");
  const int64_t shared_width = checked_mul(c.moe_intermediate_size, c.n_shared_experts, "moe_intermediate_size x n_shared_experts");
  s.plain(p + "model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string layer = p + "model.layers." + std::to_string(l);
    s.plain(layer + ".input_layernorm.weight", {h});
    const std::string attn = layer + ".self_attn";
    if (c.q_lora_rank) {
      s.linear(attn + ".q_a_proj", *c.q_lora_rank, h);
      s.plain(attn + ".q_a_layernorm.weight", {*c.q_lora_rank});
      s.linear(attn + ".q_b_proj", q_rows, *c.q_lora_rank);
    } else {
      s.linear(attn + ".q_proj", q_rows, h);
    }
    s.linear(attn + ".kv_a_proj_with_mqa", kv_a_rows, h);
    s.plain(attn + ".kv_a_layernorm.weight", {c.kv_lora_rank});
    s.linear(attn + ".kv_b_proj", kv_b_rows, c.kv_lora_rank);
    s.linear(attn + ".o_proj", h, o_cols);
    s.plain(layer + ".post_attention_layernorm.weight", {h});
    const std::string mlp = layer + ".mlp";
    if (c.is_moe_layer(l)) {
      // The router is not an nn.Linear (never quantized); its bias is an f32 buffer.
      s.plain(mlp + ".gate.weight", {c.n_routed_experts, h});
      s.plain(mlp + ".gate.e_score_correction_bias", {c.n_routed_experts}, DType::F32);
      s.widen_last();  // save_pretrained in bf16 stores it in bf16
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        s.mlp(mlp + ".experts." + std::to_string(e), h, c.moe_intermediate_size);
      if (c.n_shared_experts > 0)
        s.mlp(mlp + ".shared_experts", h, shared_width);
    } else {
      s.mlp(mlp, h, c.intermediate_size);
    }
  }
  s.plain(p + "model.norm.weight", {h});
  if (!c.tie_word_embeddings) s.linear(p + "lm_head", c.vocab_size, h);
  return s.take();
}

// Names follow z-lab's DFlashDraftModel (Qwen3 decoder layers, fc + hidden_norm, final norm).
std::vector<TensorSpec> draft_tensor_specs(const DraftConfig& d) {
  SpecList s(nullptr);
  const int64_t h = d.hidden_size;
  const int64_t n_ids = static_cast<int64_t>(d.target_layer_ids.size());
  s.linear("fc", h, checked_mul(n_ids, h, "len(target_layer_ids) x hidden_size"));
  const int64_t q_rows = checked_mul(d.num_attention_heads, d.head_dim, "num_attention_heads x head_dim");
  const int64_t kv_rows = checked_mul(d.num_key_value_heads, d.head_dim, "num_key_value_heads x head_dim");
  s.plain("hidden_norm.weight", {h});
  for (int64_t l = 0; l < d.num_hidden_layers; ++l) {
    const std::string layer = "layers." + std::to_string(l);
    s.plain(layer + ".input_layernorm.weight", {h});
    const std::string attn = layer + ".self_attn";
    s.linear(attn + ".q_proj", q_rows, h);
    s.linear(attn + ".k_proj", kv_rows, h);
    s.linear(attn + ".v_proj", kv_rows, h);
    s.linear(attn + ".o_proj", h, q_rows);
    s.plain(attn + ".q_norm.weight", {d.head_dim});
    s.plain(attn + ".k_norm.weight", {d.head_dim});
    s.plain(layer + ".post_attention_layernorm.weight", {h});
    s.mlp(layer + ".mlp", h, d.intermediate_size);
  }
  s.plain("norm.weight", {h});
  return s.take();
}

}  // namespace kplan
