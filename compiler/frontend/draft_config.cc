#include "compiler/frontend/draft_config.h"

#include <nlohmann/json.hpp>

#include "compiler/frontend/json_fields.h"
#include "compiler/frontend/rope_config.h"
#include "ir/support/error.h"

namespace kplan {

namespace {

// DFlash fields live in dflash_config; older drafters put them at the top level.
const JsonFields& dflash_source(const std::optional<JsonFields>& dflash, const JsonFields& root,
                                const std::string& key) {
  return dflash && dflash->has(key) ? *dflash : root;
}

// Features of later DFlash variants (DFlash2: convolutions, candidate selector, logit shaping)
// change the computation; kplan implements plain DFlash only, so refuse them by name.
void refuse_unsupported_variants(const JsonFields& f) {
  for (const char* key : {"conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"})
    if (f.has(key)) f.fail(key, "DFlash2 drafters are not supported (plain DFlash only)");
  if (f.has("output_multiplier") && f.req_number("output_multiplier") != 1.0)
    f.fail("output_multiplier", "scaled drafter logits are not supported");
  if (f.has("final_logit_softcapping") && f.req_number("final_logit_softcapping") > 0.0)
    f.fail("final_logit_softcapping", "drafter logit soft-capping is not supported");
  if (f.has("input_embedding_scale") && f.req_number("input_embedding_scale") != 1.0)
    f.fail("input_embedding_scale", "scaled drafter input embeddings are not supported");
}

}  // namespace

DraftConfig parse_draft_config(const nlohmann::json& j, const std::string& source) {
  JsonFields root(j, source);
  DraftConfig c;
  c.model_type = root.req_string("model_type");
  if (c.model_type != "qwen3")
    root.fail("model_type", "unsupported drafter model type '" + c.model_type + "' (kplan supports qwen3 DFlash drafters)");
  for (const auto& arch : root.opt_string_list("architectures"))
    if (arch != "DFlashDraftModel")
      root.fail("architectures", "unsupported drafter architecture '" + arch + "' (kplan supports DFlashDraftModel)");

  c.hidden_size = root.req_int("hidden_size");
  c.num_hidden_layers = root.req_int("num_hidden_layers");
  c.num_attention_heads = root.req_int("num_attention_heads");
  c.num_key_value_heads = root.opt_int("num_key_value_heads", c.num_attention_heads);
  c.intermediate_size = root.req_int("intermediate_size");
  c.vocab_size = root.req_int("vocab_size");
  for (auto [key, v] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"intermediate_size", c.intermediate_size},
                        {"vocab_size", c.vocab_size}})
    if (v <= 0) root.fail(key, "must be positive, got " + std::to_string(v));
  if (c.hidden_size % c.num_attention_heads != 0 && !root.has("head_dim"))
    root.fail("head_dim", "missing required field (hidden_size is not divisible by num_attention_heads)");
  c.head_dim = root.opt_int("head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    root.fail("head_dim", "must be positive and even, got " + std::to_string(c.head_dim));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    root.fail("num_key_value_heads", "num_attention_heads " + std::to_string(c.num_attention_heads) +
                                         " is not a multiple of num_key_value_heads " +
                                         std::to_string(c.num_key_value_heads));
  c.rms_norm_eps = root.opt_number("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) root.fail("rms_norm_eps", "must be positive");
  c.max_position_embeddings = root.opt_int("max_position_embeddings", 4096);
  if (c.max_position_embeddings <= 0) root.fail("max_position_embeddings", "must be positive");
  RopeFields rope = parse_rope_fields(root, c.max_position_embeddings);
  c.rope_theta = rope.theta;
  c.rope_scaling = rope.scaling;

  std::string act = root.opt_string("hidden_act", "silu");
  if (act != "silu") root.fail("hidden_act", "unsupported activation '" + act + "' (kplan supports silu)");
  if (root.opt_bool("attention_bias", false))
    root.fail("attention_bias", "attention projections with bias are not supported");
  if (root.opt_bool("is_causal", false))
    root.fail("is_causal", "causal DFlash drafters are not supported (the block attends non-causally)");
  if (root.opt_bool("use_sliding_window", false))
    root.fail("use_sliding_window", "sliding-window drafter attention is not supported");
  for (const auto& lt : root.opt_string_list("layer_types"))
    if (lt != "full_attention")
      root.fail("layer_types", "unsupported drafter layer type '" + lt + "' (full_attention only)");
  if (root.opt_bool("tie_word_embeddings", false))
    root.fail("tie_word_embeddings", "must be false (the drafter uses the target's embedding and lm_head)");

  c.num_target_layers = root.req_int("num_target_layers");
  if (c.num_target_layers <= 0) root.fail("num_target_layers", "must be positive");
  std::optional<JsonFields> dflash = root.opt_object("dflash_config");
  refuse_unsupported_variants(root);
  if (dflash) refuse_unsupported_variants(*dflash);

  const JsonFields& bs = dflash_source(dflash, root, "block_size");
  c.block_size = bs.req_int("block_size");
  if (c.block_size < 2) bs.fail("block_size", "must be at least 2, got " + std::to_string(c.block_size));
  // A block spans block_size positions: more than the drafter's positions is a broken config,
  // and refusing it here keeps a block of 10^9 from being allocated per round.
  if (c.block_size > c.max_position_embeddings)
    bs.fail("block_size", std::to_string(c.block_size) + " is more than max_position_embeddings " +
                              std::to_string(c.max_position_embeddings));
  const JsonFields& ids = dflash_source(dflash, root, "target_layer_ids");
  c.target_layer_ids = ids.req_int_list("target_layer_ids");
  if (c.target_layer_ids.empty()) ids.fail("target_layer_ids", "must not be empty");
  for (int64_t id : c.target_layer_ids)
    if (id < 0) ids.fail("target_layer_ids", "negative layer id " + std::to_string(id));
  const JsonFields& mask = dflash_source(dflash, root, "mask_token_id");
  c.mask_token_id = mask.req_int("mask_token_id");
  if (c.mask_token_id < 0 || c.mask_token_id >= c.vocab_size)
    mask.fail("mask_token_id", "token id " + std::to_string(c.mask_token_id) + " outside the vocabulary [0, " +
                                   std::to_string(c.vocab_size) + ")");
  return c;
}

DraftConfig load_draft_config(const std::filesystem::path& config_json) {
  return parse_draft_config(read_json_file(config_json.string()), config_json.string());
}

nlohmann::json draft_config_to_json(const DraftConfig& c) {
  nlohmann::json j;
  j["architectures"] = {"DFlashDraftModel"};
  j["model_type"] = c.model_type.empty() ? std::string("qwen3") : c.model_type;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["vocab_size"] = c.vocab_size;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_to_json(c.rope_scaling);
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = false;
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["torch_dtype"] = "bfloat16";
  j["dtype"] = "bfloat16";
  j["num_target_layers"] = c.num_target_layers;
  j["block_size"] = c.block_size;
  j["dflash_config"] = {{"block_size", c.block_size},
                        {"mask_token_id", c.mask_token_id},
                        {"target_layer_ids", c.target_layer_ids}};
  return j;
}

void check_draft_fits_target(const DraftConfig& draft, const ModelConfig& target) {
  auto refuse = [](const std::string& what) { throw Error("drafter does not fit the target: " + what); };
  if (draft.hidden_size != target.hidden_size)
    refuse("hidden_size " + std::to_string(draft.hidden_size) + " != target hidden_size " +
           std::to_string(target.hidden_size));
  if (draft.vocab_size != target.vocab_size)
    refuse("vocab_size " + std::to_string(draft.vocab_size) + " != target vocab_size " +
           std::to_string(target.vocab_size));
  if (draft.num_target_layers != target.num_hidden_layers)
    refuse("num_target_layers " + std::to_string(draft.num_target_layers) + " != target num_hidden_layers " +
           std::to_string(target.num_hidden_layers));
  for (int64_t id : draft.target_layer_ids)
    if (id < 0 || id >= target.num_hidden_layers)
      refuse("target_layer_ids entry " + std::to_string(id) + " is not a target layer (target has " +
             std::to_string(target.num_hidden_layers) + " layers)");
  if (draft.mask_token_id < 0 || draft.mask_token_id >= target.vocab_size)
    refuse("mask_token_id " + std::to_string(draft.mask_token_id) + " is outside the target vocabulary of " +
           std::to_string(target.vocab_size));
}

}  // namespace kplan
