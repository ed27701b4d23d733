#include "schemas/model_spec_table.h"

#include <string>
#include <vector>

#include "ir/support/error.h"

namespace kplan::plan {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <typename T>
std::vector<T> vec(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

Offset<fb::RopeScalingSpec> build_rope(FlatBufferBuilder& b, const RopeScaling& r) {
  return fb::CreateRopeScalingSpec(b, b.CreateString(r.type), r.factor, r.original_max_position_embeddings, r.beta_fast,
                                   r.beta_slow, r.mscale, r.mscale_all_dim,
                                   r.attention_factor.value_or(0.0));
}

RopeScaling read_rope(const fb::RopeScalingSpec* s) {
  RopeScaling r;
  if (!s) return r;
  r.type = str(s->type());
  r.factor = s->factor();
  r.original_max_position_embeddings = s->original_max_position_embeddings();
  r.beta_fast = s->beta_fast();
  r.beta_slow = s->beta_slow();
  r.mscale = s->mscale();
  r.mscale_all_dim = s->mscale_all_dim();
  if (s->attention_factor() > 0) r.attention_factor = s->attention_factor();
  return r;
}

}  // namespace

Offset<fb::ModelSpec> build_model_spec(FlatBufferBuilder& b, const ModelConfig& c) {
  const QuantConfig& q = c.quant;
  auto quant = fb::CreateQuantSpec(b, q.enabled, b.CreateString(q.quant_method), b.CreateString(q.format), q.num_bits,
                                   q.group_size, q.symmetric, b.CreateVectorOfStrings(q.ignore));
  auto rope = build_rope(b, c.rope_scaling);
  auto model_type = b.CreateString(c.model_type), wrapper = b.CreateString(c.wrapper_type),
       prefix = b.CreateString(c.tensor_prefix), scoring = b.CreateString(c.scoring_func),
       topk = b.CreateString(c.topk_method), act = b.CreateString(c.hidden_act);
  auto eos = b.CreateVector(c.eos_token_ids);
  fb::ModelSpecBuilder m(b);
  m.add_model_type(model_type);
  m.add_wrapper_type(wrapper);
  m.add_tensor_prefix(prefix);
  m.add_vocab_size(c.vocab_size);
  m.add_hidden_size(c.hidden_size);
  m.add_intermediate_size(c.intermediate_size);
  m.add_moe_intermediate_size(c.moe_intermediate_size);
  m.add_num_hidden_layers(c.num_hidden_layers);
  m.add_num_attention_heads(c.num_attention_heads);
  m.add_num_key_value_heads(c.num_key_value_heads);
  m.add_q_lora_rank(c.q_lora_rank.value_or(-1));
  m.add_kv_lora_rank(c.kv_lora_rank);
  m.add_qk_nope_head_dim(c.qk_nope_head_dim);
  m.add_qk_rope_head_dim(c.qk_rope_head_dim);
  m.add_v_head_dim(c.v_head_dim);
  m.add_n_routed_experts(c.n_routed_experts);
  m.add_num_experts_per_tok(c.num_experts_per_tok);
  m.add_n_shared_experts(c.n_shared_experts);
  m.add_first_k_dense_replace(c.first_k_dense_replace);
  m.add_moe_layer_freq(c.moe_layer_freq);
  m.add_routed_scaling_factor(c.routed_scaling_factor);
  m.add_scoring_func(scoring);
  m.add_topk_method(topk);
  m.add_n_group(c.n_group);
  m.add_topk_group(c.topk_group);
  m.add_norm_topk_prob(c.norm_topk_prob);
  m.add_rope_theta(c.rope_theta);
  m.add_rope_scaling(rope);
  m.add_max_position_embeddings(c.max_position_embeddings);
  m.add_rms_norm_eps(c.rms_norm_eps);
  m.add_tie_word_embeddings(c.tie_word_embeddings);
  m.add_bos_token_id(c.bos_token_id);
  m.add_eos_token_ids(eos);
  m.add_hidden_act(act);
  m.add_quant(quant);
  return m.Finish();
}

ModelConfig read_model_spec(const fb::ModelSpec& s) {
  ModelConfig c;
  c.model_type = str(s.model_type());
  c.wrapper_type = str(s.wrapper_type());
  c.tensor_prefix = str(s.tensor_prefix());
  c.vocab_size = s.vocab_size();
  c.hidden_size = s.hidden_size();
  c.intermediate_size = s.intermediate_size();
  c.moe_intermediate_size = s.moe_intermediate_size();
  c.num_hidden_layers = s.num_hidden_layers();
  c.num_attention_heads = s.num_attention_heads();
  c.num_key_value_heads = s.num_key_value_heads();
  if (s.q_lora_rank() >= 0) c.q_lora_rank = s.q_lora_rank();
  c.kv_lora_rank = s.kv_lora_rank();
  c.qk_nope_head_dim = s.qk_nope_head_dim();
  c.qk_rope_head_dim = s.qk_rope_head_dim();
  c.v_head_dim = s.v_head_dim();
  c.n_routed_experts = s.n_routed_experts();
  c.num_experts_per_tok = s.num_experts_per_tok();
  c.n_shared_experts = s.n_shared_experts();
  c.first_k_dense_replace = s.first_k_dense_replace();
  c.moe_layer_freq = s.moe_layer_freq();
  c.routed_scaling_factor = s.routed_scaling_factor();
  c.scoring_func = str(s.scoring_func());
  c.topk_method = str(s.topk_method());
  c.n_group = s.n_group();
  c.topk_group = s.topk_group();
  c.norm_topk_prob = s.norm_topk_prob();
  c.rope_theta = s.rope_theta();
  c.rope_scaling = read_rope(s.rope_scaling());
  c.max_position_embeddings = s.max_position_embeddings();
  c.rms_norm_eps = s.rms_norm_eps();
  c.tie_word_embeddings = s.tie_word_embeddings();
  c.bos_token_id = s.bos_token_id();
  c.eos_token_ids = vec(s.eos_token_ids());
  c.hidden_act = str(s.hidden_act());
  if (const fb::QuantSpec* q = s.quant()) {
    c.quant.enabled = q->enabled();
    c.quant.quant_method = str(q->quant_method());
    c.quant.format = str(q->format());
    c.quant.num_bits = q->num_bits();
    c.quant.group_size = q->group_size();
    c.quant.symmetric = q->symmetric();
    if (q->ignore())
      for (const flatbuffers::String* i : *q->ignore()) c.quant.ignore.push_back(i->str());
  }
  return c;
}

Offset<fb::DraftSpec> build_draft_spec(FlatBufferBuilder& b, const DraftConfig& c) {
  auto rope = build_rope(b, c.rope_scaling);
  auto model_type = b.CreateString(c.model_type);
  auto layers = b.CreateVector(c.target_layer_ids);
  fb::DraftSpecBuilder d(b);
  d.add_model_type(model_type);
  d.add_hidden_size(c.hidden_size);
  d.add_num_hidden_layers(c.num_hidden_layers);
  d.add_num_attention_heads(c.num_attention_heads);
  d.add_num_key_value_heads(c.num_key_value_heads);
  d.add_head_dim(c.head_dim);
  d.add_intermediate_size(c.intermediate_size);
  d.add_vocab_size(c.vocab_size);
  d.add_rms_norm_eps(c.rms_norm_eps);
  d.add_rope_theta(c.rope_theta);
  d.add_rope_scaling(rope);
  d.add_max_position_embeddings(c.max_position_embeddings);
  d.add_num_target_layers(c.num_target_layers);
  d.add_block_size(c.block_size);
  d.add_target_layer_ids(layers);
  d.add_mask_token_id(c.mask_token_id);
  d.add_sliding_window(c.sliding_window.value_or(0));
  d.add_context_window(c.context_window);
  return d.Finish();
}

DraftConfig read_draft_spec(const fb::DraftSpec& s) {
  DraftConfig c;
  c.model_type = str(s.model_type());
  c.hidden_size = s.hidden_size();
  c.num_hidden_layers = s.num_hidden_layers();
  c.num_attention_heads = s.num_attention_heads();
  c.num_key_value_heads = s.num_key_value_heads();
  c.head_dim = s.head_dim();
  c.intermediate_size = s.intermediate_size();
  c.vocab_size = s.vocab_size();
  c.rms_norm_eps = s.rms_norm_eps();
  c.rope_theta = s.rope_theta();
  c.rope_scaling = read_rope(s.rope_scaling());
  c.max_position_embeddings = s.max_position_embeddings();
  c.num_target_layers = s.num_target_layers();
  c.block_size = s.block_size();
  c.target_layer_ids = vec(s.target_layer_ids());
  c.mask_token_id = s.mask_token_id();
  if (s.sliding_window() > 0) c.sliding_window = s.sliding_window();
  if (s.context_window() < 0) throw Error("plan: draft.context_window " + std::to_string(s.context_window()) + " is negative");
  c.context_window = s.context_window();
  return c;
}

}  // namespace kplan::plan
