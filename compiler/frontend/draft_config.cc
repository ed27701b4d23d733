#include "compiler/frontend/draft_config.h"

#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "compiler/frontend/json_fields.h"
#include "compiler/frontend/model_config.h"
#include "compiler/frontend/rope_config.h"
#include "ir/support/error.h"
#include "ir/support/yarn.h"

namespace kplan {

namespace {

// Where a DFlash field may sit, in lookup order: dflash_config, the model object (text_config
// when the fields are nested), the top level. Each object is looked at once.
class DflashFields {
 public:
  DflashFields(const std::optional<JsonFields>& dflash, const JsonFields& model, const JsonFields& root) {
    if (dflash) objects_.push_back(&*dflash);
    objects_.push_back(&model);
    if (&model.json() != &root.json()) objects_.push_back(&root);
    model_ = &model;
  }

  // The first object holding `key` (not null), or nullptr.
  const JsonFields* find(const std::string& key) const {
    for (const JsonFields* f : objects_)
      if (f->has(key)) return f;
    return nullptr;
  }
  // The object to read `key` from: the first holding it, else the model object (where a
  // missing required field is reported).
  const JsonFields& source(const std::string& key) const {
    const JsonFields* f = find(key);
    return f ? *f : *model_;
  }
  const std::vector<const JsonFields*>& all() const { return objects_; }

 private:
  std::vector<const JsonFields*> objects_;
  const JsonFields* model_ = nullptr;
};

// Features of later DFlash variants change the computation (DFlash2: convolutions and a
// candidate selector; LiLiCorr, DSpark, Domino: extra heads; logit shaping); kplan implements
// plain DFlash only, so refuse them by name.
void refuse_unsupported_variants(const JsonFields& f) {
  for (const char* key : {"conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"})
    if (f.has(key)) f.fail(key, "DFlash2 drafters are not supported (plain DFlash only)");
  for (const char* key : {"lilicorr_enabled", "markov_rank", "gru_hidden_dim"})
    if (f.has(key)) f.fail(key, "drafters with an extra head (LiLiCorr, DSpark, Domino) are not supported (plain DFlash only)");
  if (f.has("projector_type")) {
    const nlohmann::json& v = f.json().at("projector_type");
    f.fail("projector_type", "drafter projector type '" + (v.is_string() ? v.get<std::string>() : v.dump()) +
                                 "' is not supported (plain DFlash only: fc + hidden_norm)");
  }
  if (f.has("output_multiplier") && f.req_number("output_multiplier") != 1.0)
    f.fail("output_multiplier", "scaled drafter logits are not supported");
  if (f.has("final_logit_softcapping") && f.req_number("final_logit_softcapping") > 0.0)
    f.fail("final_logit_softcapping", "drafter logit soft-capping is not supported");
  if (f.has("input_embedding_scale") && f.req_number("input_embedding_scale") != 1.0)
    f.fail("input_embedding_scale", "scaled drafter input embeddings are not supported");
}

// What the drafter's attention must be: non-causal (the block attends to itself both ways), no
// attention sinks. Checked in every object a server reads these from.
void refuse_unsupported_attention(const JsonFields& f) {
  for (const char* key : {"is_causal", "causal"})
    if (f.opt_bool(key, false))
      f.fail(key, "causal DFlash drafters are not supported (the block attends non-causally)");
  for (const char* key : {"attention_sink_bias", "add_swa_attention_sink_bias"})
    if (f.opt_bool(key, false))
      f.fail(key, "drafter attention sinks are not supported (kplan's drafter attention has no sink logit)");
  // Qwen3's rotate_half pairs (x[i], x[i + D/2]) are vLLM's neox style; GPT-J pairs are not.
  if (f.has("is_neox_style") && !f.req_bool("is_neox_style"))
    f.fail("is_neox_style", "GPT-J style (interleaved) drafter RoPE is not supported (Qwen3 rotate_half only)");
}

// The drafter's fc reads the target's hidden states and its logits are the target's lm_head:
// a config naming a different width or vocabulary has tensors of its own kplan does not run.
void refuse_own_heads(const JsonFields& m, int64_t hidden_size, int64_t vocab_size) {
  if (m.opt_bool("tie_word_embeddings", false))
    m.fail("tie_word_embeddings", "must be false (the drafter uses the target's embedding and lm_head)");
  if (m.has("draft_vocab_size") && m.req_int("draft_vocab_size") != vocab_size)
    m.fail("draft_vocab_size", "a drafter vocabulary of its own (" + std::to_string(m.req_int("draft_vocab_size")) +
                                   " != vocab_size " + std::to_string(vocab_size) +
                                   ") is not supported (the drafter uses the target's lm_head)");
  if (m.has("target_hidden_size") && m.req_int("target_hidden_size") != hidden_size)
    m.fail("target_hidden_size", std::to_string(m.req_int("target_hidden_size")) + " != hidden_size " +
                                     std::to_string(hidden_size) + " is not supported (fc reads hidden_size features per tapped layer)");
}

// quantization_config: kplan reads the drafter's weights as bf16 only.
void refuse_quantized(const JsonFields& f) {
  if (f.has("quantization_config"))
    f.fail("quantization_config", "quantized drafters are not supported (bf16 drafter weights only)");
}

// Sliding-window attention: vLLM's rule for the DFlash layouts (Model-Optimizer writes
// dflash_config.use_swa with swa_window_size, or a top-level sliding_window, and keeps
// layer_types all full_attention). Without use_swa a sliding_window is not applied.
std::optional<int64_t> parse_window(const DflashFields& f) {
  const JsonFields* use = f.find("use_swa");
  if (!use || !use->req_bool("use_swa")) return std::nullopt;
  const JsonFields* w = f.find("swa_window_size");
  const char* key = "swa_window_size";
  if (!w) {
    w = f.find("sliding_window");
    key = "sliding_window";
  }
  if (!w) use->fail("use_swa", "sliding-window attention needs a window (swa_window_size or sliding_window)");
  const int64_t window = w->req_int(key);
  if (window < 1) w->fail(key, "must be positive, got " + std::to_string(window));
  return window;
}

int64_t resolve_mask_token(const DflashFields& f, int64_t vocab_size, const std::optional<SpecialTokenLookup>& tokens) {
  const JsonFields* id_at = f.find("mask_token_id");
  const JsonFields* text_at = f.find("mask_token");
  if (!id_at && !text_at) f.source("mask_token_id").req_int("mask_token_id");  // "missing required field"
  std::optional<int64_t> id;
  if (id_at) {
    id = id_at->req_int("mask_token_id");
    if (*id < 0 || *id >= vocab_size)
      id_at->fail("mask_token_id", "token id " + std::to_string(*id) + " outside the vocabulary [0, " +
                                       std::to_string(vocab_size) + ")");
  }
  if (!text_at) return *id;
  const std::string text = text_at->req_string("mask_token");
  if (!tokens) {
    if (id) return *id;  // the id is given: the string is documentation
    text_at->fail("mask_token", "'" + text +
                                    "' is resolved by the target's tokenizer, and none was found (tokenizer_config.json "
                                    "beside the target's config.json); give dflash_config.mask_token_id instead");
  }
  const std::optional<int64_t> found = tokens->find(text);
  if (!found) text_at->fail("mask_token", "'" + text + "' is not a special token of " + tokens->source);
  if (id && *id != *found)
    text_at->fail("mask_token", "'" + text + "' is id " + std::to_string(*found) + " in " + tokens->source +
                                    ", but mask_token_id is " + std::to_string(*id));
  if (*found < 0 || *found >= vocab_size)
    text_at->fail("mask_token", "'" + text + "' is id " + std::to_string(*found) + ", outside the vocabulary [0, " +
                                    std::to_string(vocab_size) + ")");
  return *found;
}

}  // namespace

std::vector<int64_t> derive_target_layer_ids(int64_t num_target_layers, int64_t num_draft_layers) {
  if (num_target_layers < 1 || num_draft_layers < 1)
    throw Error("derive_target_layer_ids: layer counts must be positive");
  if (num_draft_layers == 1) return {num_target_layers / 2};
  const int64_t start = 1, end = num_target_layers - 3, span = end - start;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < num_draft_layers; ++i) {
    // Python's round(): to nearest, ties to even (std::nearbyint in the default rounding mode).
    const double x = static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(span) /  // no int64 product
                     static_cast<double>(num_draft_layers - 1);
    ids.push_back(static_cast<int64_t>(std::nearbyint(x)));
  }
  return ids;
}

std::optional<SpecialTokenLookup> target_special_tokens(const std::filesystem::path& target_dir) {
  const std::filesystem::path file = target_dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  // Read when a token is looked up: a drafter that gives mask_token_id never needs the file.
  return SpecialTokenLookup{file.string(), [file](const std::string& text) -> std::optional<int64_t> {
                              const nlohmann::json j = read_json_file(file.string());
                              JsonFields root(j, file.string());
                              auto added = root.opt_object("added_tokens_decoder");
                              if (!added) return std::nullopt;
                              for (const auto& [key, entry] : added->json().items()) {
                                int64_t id = -1;
                                const auto [ptr, err] = std::from_chars(key.data(), key.data() + key.size(), id);
                                if (err != std::errc() || ptr != key.data() + key.size() || id < 0)
                                  added->fail(key, "expected a token id as the key");
                                JsonFields e(entry, file.string(), added->field_path(key));
                                if (e.req_string("content") == text) return id;
                              }
                              return std::nullopt;
                            }};
}

DraftConfig parse_draft_config(const nlohmann::json& j, const std::string& source,
                               const std::optional<SpecialTokenLookup>& tokens) {
  JsonFields root(j, source);
  // Model-Optimizer may nest the model's fields in text_config (as multimodal targets do).
  std::optional<JsonFields> text = root.opt_object("text_config");
  const JsonFields& m = text ? *text : root;
  DraftConfig c;
  const JsonFields& type_at = m.has("model_type") ? m : root;
  c.model_type = type_at.req_string("model_type");
  if (c.model_type != "qwen3")
    type_at.fail("model_type", "unsupported drafter model type '" + c.model_type + "' (kplan supports qwen3 DFlash drafters)");
  for (const JsonFields* f : {static_cast<const JsonFields*>(&root), &m})
    for (const auto& arch : f->opt_string_list("architectures"))
      if (arch != "DFlashDraftModel")
        f->fail("architectures", "unsupported drafter architecture '" + arch + "' (kplan supports DFlashDraftModel)");

  c.hidden_size = m.req_int("hidden_size");
  c.num_hidden_layers = m.req_int("num_hidden_layers");
  c.num_attention_heads = m.req_int("num_attention_heads");
  c.num_key_value_heads = m.opt_int("num_key_value_heads", c.num_attention_heads);
  c.intermediate_size = m.req_int("intermediate_size");
  c.vocab_size = m.req_int("vocab_size");
  for (auto [key, v] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"intermediate_size", c.intermediate_size},
                        {"vocab_size", c.vocab_size}})
    if (v <= 0) m.fail(key, "must be positive, got " + std::to_string(v));
  if (c.num_hidden_layers > kMaxConfigLayers)
    m.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " is more drafter layers than kplan builds (at most " +
                                    std::to_string(kMaxConfigLayers) + "; DFlash drafters have 1 to 8)");
  if (c.hidden_size % c.num_attention_heads != 0 && !m.has("head_dim"))
    m.fail("head_dim", "missing required field (hidden_size is not divisible by num_attention_heads)");
  c.head_dim = m.opt_int("head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    m.fail("head_dim", "must be positive and even, got " + std::to_string(c.head_dim));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    m.fail("num_key_value_heads", "num_attention_heads " + std::to_string(c.num_attention_heads) +
                                      " is not a multiple of num_key_value_heads " +
                                      std::to_string(c.num_key_value_heads));
  c.rms_norm_eps = m.opt_number("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) m.fail("rms_norm_eps", "must be positive");
  c.max_position_embeddings = m.opt_int("max_position_embeddings", 4096);
  if (c.max_position_embeddings <= 0) m.fail("max_position_embeddings", "must be positive");
  RopeFields rope = parse_rope_fields(m, c.max_position_embeddings);
  c.rope_theta = rope.theta;
  c.rope_scaling = rope.scaling;

  std::string act = m.opt_string("hidden_act", "silu");
  if (act != "silu") m.fail("hidden_act", "unsupported activation '" + act + "' (kplan supports silu)");
  if (m.opt_bool("attention_bias", false))
    m.fail("attention_bias", "attention projections with bias are not supported");
  if (m.opt_bool("use_sliding_window", false))
    m.fail("use_sliding_window", "Qwen3 sliding-window layers are not supported (DFlash windows are dflash_config.use_swa)");
  if (!m.opt_bool("use_aux_hidden_state", true))
    m.fail("use_aux_hidden_state", "must be true (the drafter reads the target's hidden states through fc)");
  for (const auto& lt : m.opt_string_list("layer_types"))
    if (lt != "full_attention")
      m.fail("layer_types", "unsupported drafter layer type '" + lt + "' (full_attention only)");
  refuse_own_heads(m, c.hidden_size, c.vocab_size);

  std::optional<JsonFields> dflash = root.opt_object("dflash_config");
  if (!dflash && text) dflash = text->opt_object("dflash_config");
  const DflashFields f(dflash, m, root);
  for (const JsonFields* o : f.all()) {
    refuse_unsupported_variants(*o);
    refuse_unsupported_attention(*o);
    refuse_quantized(*o);
  }
  for (const char* dict : {"rope_scaling", "rope_parameters"})
    if (auto r = m.opt_object(dict)) refuse_unsupported_attention(*r);
  c.sliding_window = parse_window(f);

  const JsonFields& bs = f.source("block_size");
  c.block_size = bs.req_int("block_size");
  if (c.block_size < 2) bs.fail("block_size", "must be at least 2, got " + std::to_string(c.block_size));
  // A block spans block_size positions: more than the drafter's positions is a broken config,
  // and refusing it here keeps a block of 10^9 from being allocated per round.
  if (c.block_size > c.max_position_embeddings)
    bs.fail("block_size", std::to_string(c.block_size) + " is more than max_position_embeddings " +
                              std::to_string(c.max_position_embeddings));

  // num_target_layers: what the drafter was trained against, checked against the target, and
  // what target_layer_ids are derived from when the config names none (0: not given).
  const JsonFields* ids_at = f.find("target_layer_ids");
  const JsonFields* n_at = f.find("num_target_layers");
  if (n_at || !ids_at) {
    const JsonFields& n = n_at ? *n_at : f.source("num_target_layers");
    if (!n_at && !ids_at)
      n.fail("num_target_layers", "missing required field (target_layer_ids are not given, and are derived from it)");
    c.num_target_layers = n.req_int("num_target_layers");
    if (c.num_target_layers <= 0) n.fail("num_target_layers", "must be positive");
  }
  if (ids_at) {
    c.target_layer_ids = ids_at->req_int_list("target_layer_ids");
    if (c.target_layer_ids.empty()) ids_at->fail("target_layer_ids", "must not be empty");
    for (int64_t id : c.target_layer_ids)
      if (id < 0) ids_at->fail("target_layer_ids", "negative layer id " + std::to_string(id));
  } else {
    // The reference spreads the taps over target layers 1 .. num_target_layers - 3: with more than
    // one drafter layer, fewer than 4 target layers give negative ids (Python indexes them from
    // the end), which were accepted here and refused once written back (found by fuzzing).
    if (c.num_hidden_layers > 1 && c.num_target_layers < 4)
      n_at->fail("num_target_layers", std::to_string(c.num_target_layers) + " is too few to derive target_layer_ids for " +
                                          std::to_string(c.num_hidden_layers) +
                                          " drafter layers (they are spread over target layers 1 .. num_target_layers - 3); "
                                          "give dflash_config.target_layer_ids");
    c.target_layer_ids = derive_target_layer_ids(c.num_target_layers, c.num_hidden_layers);
  }
  c.mask_token_id = resolve_mask_token(f, c.vocab_size, tokens);
  return c;
}

DraftConfig load_draft_config(const std::filesystem::path& config_json, const std::optional<SpecialTokenLookup>& tokens) {
  return parse_draft_config(read_json_file(config_json.string()), config_json.string(), tokens);
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
  if (c.num_target_layers > 0) j["num_target_layers"] = c.num_target_layers;
  j["block_size"] = c.block_size;
  j["dflash_config"] = {{"block_size", c.block_size},
                        {"mask_token_id", c.mask_token_id},
                        {"target_layer_ids", c.target_layer_ids}};
  if (c.sliding_window) {
    j["sliding_window"] = *c.sliding_window;
    j["dflash_config"]["use_swa"] = true;
    j["dflash_config"]["swa_window_size"] = *c.sliding_window;
  }
  return j;
}

void select_draft_yarn_amplitude(DraftConfig& d, const std::string& choice) {
  if (choice == "config") return;
  auto refuse = [&](const std::string& why) { throw Error("drafter YaRN amplitude '" + choice + "': " + why); };
  if (d.rope_scaling.type != "yarn") refuse("the drafter's RoPE has no YaRN scaling (only 'config' applies)");
  if (choice == "legacy") {
    d.rope_scaling.attention_factor = yarn::get_mscale(d.rope_scaling.factor, 1.0);
    return;
  }
  double v = 0;
  const auto [ptr, ec] = std::from_chars(choice.data(), choice.data() + choice.size(), v);
  if (ec != std::errc() || ptr != choice.data() + choice.size() || !(v > 0) || !std::isfinite(v))
    refuse("expected config, legacy or a positive number");
  d.rope_scaling.attention_factor = v;
}

void check_draft_window(const DraftConfig& draft, int64_t max_context) {
  if (!draft.sliding_window || *draft.sliding_window >= max_context) return;
  throw Error("drafter does not fit the plan: its sliding window (dflash_config.use_swa with swa_window_size / "
              "sliding_window) of " + std::to_string(*draft.sliding_window) + " positions is smaller than the " +
              std::to_string(max_context) +
              " positions the plan's context can reach, and kplan's drafter attention has no per-query sliding window "
              "(a window covering the whole context changes nothing and is accepted; kplan compile "
              "--draft-context-window N is the server-style context window, a different semantics)");
}

void check_draft_fits_target(const DraftConfig& draft, const ModelConfig& target, int64_t max_context) {
  auto refuse = [](const std::string& what) { throw Error("drafter does not fit the target: " + what); };
  if (draft.hidden_size != target.hidden_size)
    refuse("hidden_size " + std::to_string(draft.hidden_size) + " != target hidden_size " +
           std::to_string(target.hidden_size));
  if (draft.vocab_size != target.vocab_size)
    refuse("vocab_size " + std::to_string(draft.vocab_size) + " != target vocab_size " +
           std::to_string(target.vocab_size));
  if (draft.num_target_layers > 0 && draft.num_target_layers != target.num_hidden_layers)
    refuse("num_target_layers " + std::to_string(draft.num_target_layers) + " != target num_hidden_layers " +
           std::to_string(target.num_hidden_layers));
  for (int64_t id : draft.target_layer_ids)
    if (id < 0 || id >= target.num_hidden_layers)
      refuse("target_layer_ids entry " + std::to_string(id) + " is not a target layer (target has " +
             std::to_string(target.num_hidden_layers) + " layers)");
  if (draft.mask_token_id < 0 || draft.mask_token_id >= target.vocab_size)
    refuse("mask_token_id " + std::to_string(draft.mask_token_id) + " is outside the target vocabulary of " +
           std::to_string(target.vocab_size));
  check_draft_window(draft, max_context > 0 ? max_context : target.max_position_embeddings);
}

}  // namespace kplan
