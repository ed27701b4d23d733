// @draft_context, @draft_commit and @draft of a DFlash drafter (Qwen3-style layers, z-lab dflash
// model.py): context K/V from the target's captured hidden states, the accepted rows of a verify
// step's context K/V kept, then one non-causal block pass.
#include <algorithm>
#include <cmath>

#include "compiler/driver/build_parts.h"
#include "ir/support/error.h"

namespace kplan {

namespace {

using ir::Dim;
using ir::Type;
using ir::Value;

std::string layer_name(int64_t l) { return "layers." + std::to_string(l); }

Type draft_cache_type(const DraftConfig& d) {
  return Type{DType::F32, {Dim::sym("S"), Dim(d.num_key_value_heads * d.head_dim)}};
}

// Per-head q_norm / k_norm then rotate_half RoPE: x [R, heads*hd] -> [R, heads, hd].
Value* norm_rope_heads(ir::Builder& b, const WeightTable& w, const DraftConfig& d, Value* x,
                       int64_t heads, const std::string& norm, Value* positions) {
  const Dim rows = x->type().shape[0];
  Value* h = b.reshape(x, {rows, heads, d.head_dim});
  h = b.rms_norm(h, w.weight(b, norm), d.rms_norm_eps);
  return b.rope(h, positions, rope_attrs(d.rope_theta, d.rope_scaling, /*interleaved=*/false));
}

void build_context(const DraftConfig& d, const WeightTable& w, ir::Module& m) {
  ir::Function& fn = *m.add_function("draft_context");
  ir::Builder b(fn);
  const Dim C = Dim::sym("C");
  const int64_t h = d.hidden_size;
  std::vector<Value*> hiddens;
  for (int64_t id : d.target_layer_ids)
    hiddens.push_back(fn.add_arg("hidden." + std::to_string(id), Type{DType::F32, {C, Dim(h)}}));
  Value* positions = fn.add_arg("ctx_positions", Type{DType::I32, {C}});
  std::vector<std::pair<Value*, Value*>> caches;
  for (int64_t l = 0; l < d.num_hidden_layers; ++l) {
    Value* dk = fn.add_arg("dk." + std::to_string(l), draft_cache_type(d));
    caches.emplace_back(dk, fn.add_arg("dv." + std::to_string(l), draft_cache_type(d)));
  }

  Value* feats = hiddens.size() == 1 ? hiddens[0] : b.concat(hiddens, 1);
  Value* projected = w.linear(b, feats, "fc");
  Value* ctx = b.rms_norm(projected, w.weight(b, "hidden_norm.weight"), d.rms_norm_eps);
  std::vector<std::pair<std::string, Value*>> outs;
  for (int64_t l = 0; l < d.num_hidden_layers; ++l) {
    const std::string a = layer_name(l) + ".self_attn";
    Value* k = norm_rope_heads(b, w, d, w.linear(b, ctx, a + ".k_proj"), d.num_key_value_heads,
                               a + ".k_norm.weight", positions);
    k = b.reshape(k, {C, d.num_key_value_heads * d.head_dim});
    Value* v = w.linear(b, ctx, a + ".v_proj");
    outs.emplace_back("dk." + std::to_string(l), b.kv_append(caches[l].first, {k}));
    outs.emplace_back("dv." + std::to_string(l), b.kv_append(caches[l].second, {v}));
  }
  for (auto& [name, v] : outs) b.output(v, name);
}

void build_propose(const DraftConfig& d, const ModelConfig& target, const WeightTable& w,
                   const WeightTable& tw, int64_t top_k, ir::Module& m) {
  ir::Function& fn = *m.add_function("draft");
  ir::Builder b(fn);
  const int64_t bs = d.block_size, hq = d.num_attention_heads, hkv = d.num_key_value_heads,
                hd = d.head_dim;
  const Dim B(bs), S = Dim::sym("S");
  Value* tokens = fn.add_arg("block_tokens", Type{DType::I32, {B}});
  Value* positions = fn.add_arg("block_positions", Type{DType::I32, {B}});
  std::vector<std::pair<Value*, Value*>> caches;
  for (int64_t l = 0; l < d.num_hidden_layers; ++l) {
    Value* dk = fn.add_arg("dk." + std::to_string(l), draft_cache_type(d));
    caches.emplace_back(dk, fn.add_arg("dv." + std::to_string(l), draft_cache_type(d)));
  }

  const std::string& p = target.tensor_prefix;
  Value* h = b.embedding(tokens, tw.weight(b, p + "model.embed_tokens.weight"));
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int64_t l = 0; l < d.num_hidden_layers; ++l) {
    const std::string L = layer_name(l), a = L + ".self_attn";
    Value* x = b.rms_norm(h, w.weight(b, L + ".input_layernorm.weight"), d.rms_norm_eps);
    Value* q = norm_rope_heads(b, w, d, w.linear(b, x, a + ".q_proj"), hq, a + ".q_norm.weight",
                               positions);
    Value* kb = norm_rope_heads(b, w, d, w.linear(b, x, a + ".k_proj"), hkv,
                                a + ".k_norm.weight", positions);
    Value* vb = b.reshape(w.linear(b, x, a + ".v_proj"), {B, hkv, hd});
    // Keys/values: the cached context first, then the block (non-causal: all visible). The
    // block's rows are appended past the context (a GPU writes them into the cache's free rows,
    // as a verify step's are); @draft returns no cache, so they are never committed.
    Value* k = b.reshape(b.kv_append(caches[l].first, {b.reshape(kb, {B, hkv * hd})}), {S + B, hkv, hd});
    Value* v = b.reshape(b.kv_append(caches[l].second, {b.reshape(vb, {B, hkv * hd})}), {S + B, hkv, hd});
    // --draft-context-window N: only the last N context rows (and the block's own) are seen.
    Value* o = b.gqa_attention(q, k, v, scale, d.context_window);
    h = b.add(h, w.linear(b, b.reshape(o, {B, hq * hd}), a + ".o_proj"));
    x = b.rms_norm(h, w.weight(b, L + ".post_attention_layernorm.weight"), d.rms_norm_eps);
    Value* g = w.linear(b, x, L + ".mlp.gate_proj");
    Value* u = w.linear(b, x, L + ".mlp.up_proj");
    h = b.add(h, w.linear(b, b.swiglu(g, u), L + ".mlp.down_proj"));
  }
  // Block row 0 is the bonus token; rows 1.. predict positions p+1 ...
  h = b.slice(h, 0, 1, bs - 1);
  h = b.rms_norm(h, w.weight(b, "norm.weight"), d.rms_norm_eps);
  const std::string head = target.tie_word_embeddings ? p + "model.embed_tokens.weight"
                                                      : p + "lm_head.weight";
  Value* logits = b.lm_head(h, tw.weight(b, head));
  b.output(logits, "logits");
  // The tree builder's input: each depth's top_k tokens by draft log-probability, so a device
  // hands over [B-1, top_k] pairs instead of [B-1, vocab] logits.
  if (top_k > 0) {
    Value* log_probs = b.create(ir::OpKind::LogSoftmax, {logits})->result(0);
    ir::Attrs a;
    a.set("k", std::min(top_k, target.vocab_size));
    ir::Op* top = b.create(ir::OpKind::TopK, {log_probs}, a);
    b.output(top->result(0), "top_log_probs");
    b.output(top->result(1), "top_ids");
  }
}

// @draft_commit: keep the accepted rows of a verify step's context K/V (a GPU computes the
// context K/V of every verified node, pending, like the target's KV; the CPU drafter computes
// only the accepted rows and never runs it).
void build_commit(const DraftConfig& d, ir::Module& m) {
  ir::Function& fn = *m.add_function("draft_commit");
  ir::Builder b(fn);
  Value* keep = fn.add_arg("keep", Type{DType::I32, {Dim::sym("A")}});
  Type step = draft_cache_type(d);
  step.shape[0] = Dim::sym("T");
  std::vector<std::pair<std::string, std::pair<Value*, Value*>>> caches;
  for (int64_t l = 0; l < d.num_hidden_layers; ++l)
    for (const char* kv : {"dk.", "dv."}) {
      const std::string n = kv + std::to_string(l);
      Value* cache = fn.add_arg(n, draft_cache_type(d));
      Value* pending = fn.add_arg(std::string(kv[1] == 'k' ? "dk_step." : "dv_step.") + std::to_string(l), step);
      caches.push_back({n, {cache, pending}});
    }
  for (auto& [name, cp] : caches) b.output(b.kv_compact(cp.first, cp.second, keep), name);
}

}  // namespace

void build_draft(const DraftConfig& d, const ModelConfig& target, const WeightTable& draft_w,
                 const WeightTable& target_w, int64_t top_k, ir::Module& m) {
  if (d.block_size < 2)
    throw Error("IR builder: drafter block_size " + std::to_string(d.block_size) +
                " leaves no position to predict");
  if (d.target_layer_ids.empty()) throw Error("IR builder: drafter has no target_layer_ids");
  build_context(d, draft_w, m);
  build_propose(d, target, draft_w, target_w, top_k, m);
  build_commit(d, m);
}

}  // namespace kplan
