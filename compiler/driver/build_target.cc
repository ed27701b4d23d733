// @target and @target_commit of a DeepSeek-V3 / Kimi K2 model, in transformers' naive form.
#include <algorithm>
#include <cmath>

#include "compiler/driver/build_ir.h"
#include "compiler/driver/build_parts.h"
#include "compiler/driver/weight_table.h"
#include "ir/support/error.h"

namespace kplan {

namespace {

using ir::Dim;
using ir::Type;
using ir::Value;

// transformers builds q_a_layernorm and kv_a_layernorm with its default eps, whatever
// rms_norm_eps says (vLLM/SGLang use rms_norm_eps); we match transformers.
constexpr double kLatentNormEps = 1e-6;

class TargetBuilder {
 public:
  TargetBuilder(const ModelConfig& c, const WeightTable& w, ir::Function& fn,
                const BuildOptions& opt, std::vector<int64_t> capture)
      : c_(c), w_(w), fn_(fn), b_(fn), opt_(opt), capture_(std::move(capture)) {}

  void build() {
    const Dim T = Dim::sym("T");
    tokens_ = fn_.add_arg("tokens", Type{DType::I32, {T}});
    positions_ = fn_.add_arg("positions", Type{DType::I32, {T}});
    if (opt_.tree_mask) mask_ = fn_.add_arg("tree_mask", Type{DType::U32, {T, Dim::sym("W")}});
    for (int64_t l = 0; l < c_.num_hidden_layers; ++l)
      caches_.push_back(fn_.add_arg("kv." + std::to_string(l), kv_cache_type(c_)));

    const std::string& p = c_.tensor_prefix;
    Value* h = b_.embedding(tokens_, w_.weight(b_, p + "model.embed_tokens.weight"));
    std::vector<std::pair<std::string, Value*>> kv_steps, hiddens;
    for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      Value* kv_step = nullptr;
      h = layer(l, h, &kv_step);
      kv_steps.emplace_back("kv_step." + std::to_string(l), kv_step);
      if (std::find(capture_.begin(), capture_.end(), l) != capture_.end())
        hiddens.emplace_back("hidden." + std::to_string(l), h);
    }
    Value* normed = b_.rms_norm(h, w_.weight(b_, p + "model.norm.weight"), c_.rms_norm_eps);
    const std::string head = c_.tie_word_embeddings ? p + "model.embed_tokens.weight"
                                                    : p + "lm_head.weight";
    if (!c_.tie_word_embeddings && w_.is_int4(p + "lm_head"))
      throw Error("IR builder: an INT4 lm_head is not supported (" + p + "lm_head)");
    Value* logits = b_.lm_head(normed, w_.weight(b_, head));
    b_.output(logits, "logits");
    for (auto& [name, v] : kv_steps) b_.output(v, name);
    for (auto& [name, v] : hiddens) b_.output(v, name);
    if (opt_.next_tokens) b_.output(b_.create(ir::OpKind::Argmax, {logits})->result(), "next_tokens");
  }

 private:
  const ModelConfig& c_;
  const WeightTable& w_;
  ir::Function& fn_;
  ir::Builder b_;
  const BuildOptions& opt_;
  std::vector<int64_t> capture_;
  Value* tokens_ = nullptr;
  Value* positions_ = nullptr;
  Value* mask_ = nullptr;
  std::vector<Value*> caches_;

  Value* layer(int64_t l, Value* h, Value** kv_step) {
    const std::string prefix = c_.tensor_prefix + "model.layers." + std::to_string(l);
    Value* x = b_.rms_norm(h, w_.weight(b_, prefix + ".input_layernorm.weight"), c_.rms_norm_eps);
    h = b_.add(h, attention(prefix + ".self_attn", l, x, kv_step));
    x = b_.rms_norm(h, w_.weight(b_, prefix + ".post_attention_layernorm.weight"),
                    c_.rms_norm_eps);
    Value* m = c_.is_moe_layer(l) ? moe(prefix + ".mlp", x) : mlp(prefix + ".mlp", x);
    return b_.add(h, m);
  }

  Value* attention(const std::string& a, int64_t l, Value* x, Value** kv_step) {
    const Dim T = Dim::sym("T");
    const int64_t heads = c_.num_attention_heads, nope = c_.qk_nope_head_dim,
                  rope = c_.qk_rope_head_dim, lora = c_.kv_lora_rank, vdim = c_.v_head_dim;
    Value* q;
    if (c_.q_lora_rank) {
      Value* qa = w_.linear(b_, x, a + ".q_a_proj");
      qa = b_.rms_norm(qa, w_.weight(b_, a + ".q_a_layernorm.weight"), kLatentNormEps);
      q = w_.linear(b_, qa, a + ".q_b_proj");
    } else {
      q = w_.linear(b_, x, a + ".q_proj");
    }
    q = b_.reshape(q, {T, heads, nope + rope});
    Value* q_nope = b_.slice(q, 2, 0, nope);
    Value* q_pe = b_.slice(q, 2, nope, rope);

    Value* kva = w_.linear(b_, x, a + ".kv_a_proj_with_mqa");
    Value* latent = b_.slice(kva, 1, 0, lora);
    Value* k_pe = b_.slice(kva, 1, lora, rope);
    latent = b_.rms_norm(latent, w_.weight(b_, a + ".kv_a_layernorm.weight"), kLatentNormEps);
    ir::Attrs ra = rope_attrs(c_.rope_theta, c_.rope_scaling, /*interleaved=*/true);
    q_pe = b_.rope(q_pe, positions_, ra);
    k_pe = b_.rope(k_pe, positions_, ra);

    // The cache holds [normed latent | roped k]; the step's rows are also an output (pending).
    *kv_step = b_.concat({latent, k_pe}, 1);
    Value* kv = b_.kv_append(caches_[l], {*kv_step});
    const Dim N = kv->type().shape[0];

    // transformers' form: expand the latent of every cached position through kv_b_proj.
    Value* kvb = w_.linear(b_, b_.slice(kv, 1, 0, lora), a + ".kv_b_proj");
    kvb = b_.reshape(kvb, {N, heads, nope + vdim});
    Value* k_nope = b_.slice(kvb, 2, 0, nope);
    Value* v = b_.slice(kvb, 2, nope, vdim);
    Value* k_rope = b_.slice(kv, 1, lora, rope);
    std::vector<Value*> operands = {q_nope, q_pe, k_nope, k_rope, v};
    if (mask_) operands.push_back(mask_);
    ir::Attrs attrs;
    attrs.set("scale", c_.softmax_scale());
    Value* o = b_.create(ir::OpKind::MlaAttentionExpanded, operands, attrs)->result();
    o = b_.reshape(o, {T, heads * vdim});
    return w_.linear(b_, o, a + ".o_proj");
  }

  Value* mlp(const std::string& m, Value* x) {
    Value* g = w_.linear(b_, x, m + ".gate_proj");
    Value* u = w_.linear(b_, x, m + ".up_proj");
    return w_.linear(b_, b_.swiglu(g, u), m + ".down_proj");
  }

  Value* moe(const std::string& m, Value* x) {
    const int64_t e = c_.n_routed_experts;
    // transformers computes the router logits in fp32 (matmul results are f32 here).
    Value* logits = b_.matmul(x, w_.weight(b_, m + ".gate.weight"));
    ir::Attrs ra;
    ra.set("top_k", c_.num_experts_per_tok);
    ra.set("n_group", c_.n_group);
    ra.set("topk_group", c_.topk_group);
    ra.set("norm_topk_prob", c_.norm_topk_prob);
    ra.set("routed_scaling_factor", c_.routed_scaling_factor);
    auto [weights, ids] =
        b_.moe_router(logits, w_.weight(b_, m + ".gate.e_score_correction_bias"), ra);
    const std::string ex = m + ".experts.*";
    Value* routed;
    if (w_.is_int4(m + ".experts.0.gate_proj")) {
      std::vector<Value*> ops = {x, weights, ids};
      for (const char* proj : {".gate_proj", ".up_proj", ".down_proj"}) {
        ops.push_back(w_.stack(b_, ex + proj + ".weight_packed", e));
        ops.push_back(w_.stack(b_, ex + proj + ".weight_scale", e));
      }
      ir::Attrs qa;
      qa.set("group_size", w_.group_size());
      routed = b_.create(ir::OpKind::MoeExpertsInt4, ops, qa)->result();
    } else {
      routed = b_.create(ir::OpKind::MoeExperts,
                         {x, weights, ids, w_.stack(b_, ex + ".gate_proj.weight", e),
                          w_.stack(b_, ex + ".up_proj.weight", e),
                          w_.stack(b_, ex + ".down_proj.weight", e)})
                   ->result();
    }
    if (c_.n_shared_experts == 0) return routed;
    return b_.add(routed, mlp(m + ".shared_experts", x));
  }
};

}  // namespace

ir::Type kv_cache_type(const ModelConfig& c) {
  return ir::Type{DType::F32, {ir::Dim::sym("S"), ir::Dim(c.kv_lora_rank + c.qk_rope_head_dim)}};
}

void build_target(const ModelConfig& c, const WeightTable& w, const BuildOptions& opt,
                  const std::vector<int64_t>& capture, ir::Module& m) {
  for (int64_t l : capture)
    if (l < 0 || l >= c.num_hidden_layers)
      throw Error("IR builder: capture layer " + std::to_string(l) + " is not a layer of the " +
                  std::to_string(c.num_hidden_layers) + "-layer target");
  TargetBuilder(c, w, *m.add_function("target"), opt, capture).build();

  // @target_commit: keep the accepted step entries of every layer's cache.
  ir::Function& fn = *m.add_function("target_commit");
  ir::Builder b(fn);
  Value* keep = fn.add_arg("keep", Type{DType::I32, {Dim::sym("A")}});
  std::vector<std::pair<Value*, Value*>> caches;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Type step = kv_cache_type(c);
    step.shape[0] = Dim::sym("T");
    Value* cache = fn.add_arg("kv." + std::to_string(l), kv_cache_type(c));
    caches.emplace_back(cache, fn.add_arg("kv_step." + std::to_string(l), step));
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    b.output(b.kv_compact(caches[l].first, caches[l].second, keep), "kv." + std::to_string(l));
}

}  // namespace kplan
