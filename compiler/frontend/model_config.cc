#include "compiler/frontend/model_config.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "compiler/frontend/json_fields.h"
#include "compiler/frontend/rope_config.h"
#include "ir/support/error.h"

namespace kplan {

namespace {

// Text models kplan compiles, and the multimodal wrapper whose text_config holds one.
bool is_text_model_type(const std::string& t) { return t == "deepseek_v3" || t == "kimi_k2"; }
constexpr const char* kWrapperType = "kimi_k25";
constexpr const char* kWrapperTensorPrefix = "language_model.";

// One compiled "re:" ignore pattern. PCRE2 reads Python's regex syntax and, with the JIT, keeps
// K2.6's ~70k module lookups fast (std::regex took over a second).
class IgnorePattern {
 public:
  explicit IgnorePattern(const std::string& pattern) : pattern_(pattern) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_ANCHORED, &err,
                          &offset, nullptr);
    if (code_) {
      pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
      match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
    }
  }
  ~IgnorePattern() {
    pcre2_match_data_free(match_);
    pcre2_code_free(code_);
  }
  IgnorePattern(const IgnorePattern&) = delete;
  IgnorePattern& operator=(const IgnorePattern&) = delete;

  bool valid() const { return code_ != nullptr; }
  // Python re.match semantics (compressed-tensors' rule): anchored at the start, not the end.
  // A match that fails for another reason than "no match" (PCRE2's match or depth limit on a
  // pattern that backtracks catastrophically) is an error: taking it as "no match" would quantize
  // a module the checkpoint keeps in bf16.
  bool matches_prefix(const std::string& s) const {
    if (!code_) return false;
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, match_, nullptr);
    if (rc >= 0) return true;
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    throw Error("quantization_config.ignore: pattern 're:" + pattern_ + "' could not be matched against '" + s +
                "': " + reinterpret_cast<const char*>(message));
  }

 private:
  std::string pattern_;  // the regex, without its "re:"
  pcre2_code* code_ = nullptr;
  pcre2_match_data* match_ = nullptr;
};

// Compiled once per "re:<regex>" entry and thread (match data is per-thread state).
const IgnorePattern& ignore_pattern(const std::string& entry) {
  thread_local std::unordered_map<std::string, std::unique_ptr<IgnorePattern>> cache;
  auto& slot = cache[entry];
  if (!slot) slot = std::make_unique<IgnorePattern>(entry.substr(3));
  return *slot;
}

void require_positive(const JsonFields& f, const std::string& key, int64_t v) {
  if (v <= 0) f.fail(key, "must be positive, got " + std::to_string(v));
}

QuantConfig parse_quant(const JsonFields& q) {
  QuantConfig c;
  c.enabled = true;
  c.quant_method = q.req_string("quant_method");
  if (c.quant_method != "compressed-tensors")
    q.fail("quant_method", "unsupported quantization method '" + c.quant_method +
                               "' (kplan supports compressed-tensors)");
  c.format = q.opt_string("format", "");
  if (q.has("kv_cache_scheme")) q.fail("kv_cache_scheme", "a quantized KV cache is not supported");
  JsonFields groups = q.req_object("config_groups");
  if (groups.json().size() != 1)
    q.fail("config_groups", "exactly one quantization group is supported, got " +
                                std::to_string(groups.json().size()));
  const std::string group_name = groups.json().begin().key();
  JsonFields g = groups.req_object(group_name);
  std::vector<std::string> targets = g.opt_string_list("targets");
  if (targets != std::vector<std::string>{"Linear"})
    g.fail("targets", "only targets [\"Linear\"] is supported");
  if (g.has("input_activations"))
    g.fail("input_activations", "activation quantization is not supported (weight-only INT4)");
  if (g.has("output_activations"))
    g.fail("output_activations", "activation quantization is not supported (weight-only INT4)");
  if (g.has("format")) c.format = g.req_string("format");  // newer writers put it per group
  if (c.format != "pack-quantized") {
    if (c.format.empty()) q.fail("format", "missing required field");
    q.fail("format", "unsupported quantization format '" + c.format + "' (kplan supports pack-quantized)");
  }
  JsonFields w = g.req_object("weights");
  // Compared as read (int64): 2^32 + 4 must not pass as 4 after a narrowing cast.
  const int64_t num_bits = w.req_int("num_bits");
  if (num_bits != 4) w.fail("num_bits", "only 4-bit weights are supported, got " + std::to_string(num_bits));
  c.num_bits = 4;
  std::string type = w.opt_string("type", "int");
  if (type != "int") w.fail("type", "only integer quantization is supported, got '" + type + "'");
  c.symmetric = w.req_bool("symmetric");
  if (!c.symmetric) w.fail("symmetric", "asymmetric quantization (zero points) is not supported");
  std::string strategy = w.req_string("strategy");
  if (strategy != "group")
    w.fail("strategy", "unsupported quantization strategy '" + strategy + "' (kplan supports group)");
  const int64_t group_size = w.req_int("group_size");
  if (group_size <= 0 || group_size % 8 != 0 || group_size > (int64_t{1} << 20))
    w.fail("group_size", "must be a positive multiple of 8 up to 2^20, got " + std::to_string(group_size));
  c.group_size = static_cast<int>(group_size);
  if (w.opt_bool("dynamic", false)) w.fail("dynamic", "dynamic weight quantization is not supported");
  if (w.has("actorder")) w.fail("actorder", "activation-order (GPTQ g_idx) quantization is not supported");
  c.ignore = q.opt_string_list("ignore");
  for (size_t i = 0; i < c.ignore.size(); ++i) {
    if (c.ignore[i].rfind("re:", 0) != 0) continue;
    if (!ignore_pattern(c.ignore[i]).valid())
      q.fail("ignore", "element " + std::to_string(i) + ": bad regular expression '" + c.ignore[i] + "'");
  }
  return c;
}

// Everything the text model's own object holds. `root` is the top-level object (the wrapper for
// kimi_k25) where shared fields such as quantization_config may also live.
ModelConfig parse_text_model(const JsonFields& t, const JsonFields& root) {
  ModelConfig c;
  c.vocab_size = t.req_int("vocab_size");
  c.hidden_size = t.req_int("hidden_size");
  c.intermediate_size = t.req_int("intermediate_size");
  c.moe_intermediate_size = t.req_int("moe_intermediate_size");
  c.num_hidden_layers = t.req_int("num_hidden_layers");
  c.num_attention_heads = t.req_int("num_attention_heads");
  c.num_key_value_heads = t.opt_int("num_key_value_heads", c.num_attention_heads);
  if (!t.contains("q_lora_rank")) t.fail("q_lora_rank", "missing required field (null when q_proj is used)");
  c.q_lora_rank = t.nullable_int("q_lora_rank");
  c.kv_lora_rank = t.req_int("kv_lora_rank");
  c.qk_nope_head_dim = t.req_int("qk_nope_head_dim");
  c.qk_rope_head_dim = t.req_int("qk_rope_head_dim");
  c.v_head_dim = t.req_int("v_head_dim");
  for (auto [key, v] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"moe_intermediate_size", c.moe_intermediate_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"kv_lora_rank", c.kv_lora_rank},
                        {"qk_nope_head_dim", c.qk_nope_head_dim},
                        {"qk_rope_head_dim", c.qk_rope_head_dim},
                        {"v_head_dim", c.v_head_dim}})
    require_positive(t, key, v);
  if (c.num_hidden_layers > kMaxConfigLayers)
    t.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " is more layers than kplan builds (at most " +
                                    std::to_string(kMaxConfigLayers) + "; Kimi K2.6 has 61)");
  if (c.q_lora_rank) require_positive(t, "q_lora_rank", *c.q_lora_rank);
  if (c.qk_rope_head_dim % 2 != 0)
    t.fail("qk_rope_head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(c.qk_rope_head_dim));
  // MLA keys have one latent per position shared by all heads; transformers' DeepseekV3 views
  // the keys with num_attention_heads heads, so a different num_key_value_heads cannot load.
  if (c.num_key_value_heads != c.num_attention_heads)
    t.fail("num_key_value_heads", "must equal num_attention_heads for MLA, got " +
                                      std::to_string(c.num_key_value_heads) + " vs " +
                                      std::to_string(c.num_attention_heads));

  c.n_routed_experts = t.req_int("n_routed_experts");
  c.num_experts_per_tok = t.req_int("num_experts_per_tok");
  c.n_shared_experts = t.req_int("n_shared_experts");
  c.first_k_dense_replace = t.req_int("first_k_dense_replace");
  c.moe_layer_freq = t.opt_int("moe_layer_freq", 1);
  c.routed_scaling_factor = t.req_number("routed_scaling_factor");
  c.scoring_func = t.opt_string("scoring_func", "sigmoid");
  c.topk_method = t.opt_string("topk_method", "noaux_tc");
  c.n_group = t.req_int("n_group");
  c.topk_group = t.req_int("topk_group");
  c.norm_topk_prob = t.req_bool("norm_topk_prob");
  require_positive(t, "n_routed_experts", c.n_routed_experts);
  require_positive(t, "num_experts_per_tok", c.num_experts_per_tok);
  require_positive(t, "n_group", c.n_group);
  require_positive(t, "topk_group", c.topk_group);
  if (c.n_shared_experts < 0) t.fail("n_shared_experts", "must be >= 0");
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers)
    t.fail("first_k_dense_replace", "must be in [0, num_hidden_layers], got " +
                                        std::to_string(c.first_k_dense_replace));
  // transformers' DeepseekV3 makes every layer >= first_k_dense_replace MoE and ignores
  // moe_layer_freq; DeepSeek's own code honours it. Only 1 means the same thing to both.
  if (c.moe_layer_freq != 1)
    t.fail("moe_layer_freq", "only 1 is supported (implementations disagree otherwise), got " +
                                 std::to_string(c.moe_layer_freq));
  if (c.scoring_func != "sigmoid")
    t.fail("scoring_func", "unsupported router scoring function '" + c.scoring_func + "' (kplan supports sigmoid)");
  if (c.topk_method != "noaux_tc")
    t.fail("topk_method", "unsupported top-k method '" + c.topk_method + "' (kplan supports noaux_tc)");
  if (c.n_routed_experts % c.n_group != 0)
    t.fail("n_group", "n_routed_experts " + std::to_string(c.n_routed_experts) +
                          " is not divisible by n_group " + std::to_string(c.n_group));
  if (c.topk_group > c.n_group)
    t.fail("topk_group", "topk_group " + std::to_string(c.topk_group) + " exceeds n_group " +
                             std::to_string(c.n_group));
  if (c.num_experts_per_tok > c.n_routed_experts)
    t.fail("num_experts_per_tok", "num_experts_per_tok " + std::to_string(c.num_experts_per_tok) +
                                      " exceeds n_routed_experts " + std::to_string(c.n_routed_experts));
  // Group scores are the sum of each group's top two experts, and top-k must fit the kept groups.
  if (c.n_group > 1 && c.n_routed_experts / c.n_group < 2)
    t.fail("n_group", "each expert group needs at least 2 experts");
  if (c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
    t.fail("num_experts_per_tok", "exceeds the experts in the topk_group kept groups");

  c.hidden_act = t.opt_string("hidden_act", "silu");
  if (c.hidden_act != "silu")
    t.fail("hidden_act", "unsupported activation '" + c.hidden_act + "' (kplan supports silu)");
  if (t.opt_bool("attention_bias", false))
    t.fail("attention_bias", "attention projections with bias are not supported");

  c.max_position_embeddings = t.opt_int("max_position_embeddings", 4096);
  require_positive(t, "max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = t.opt_number("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) t.fail("rms_norm_eps", "must be positive");

  RopeFields rope = parse_rope_fields(t, c.max_position_embeddings);
  c.rope_theta = rope.theta;
  c.rope_scaling = rope.scaling;
  // DeepSeek checkpoints store the rope slices as interleaved pairs; kplan assumes that layout.
  if (!t.opt_bool("rope_interleave", true))
    t.fail("rope_interleave", "only the interleaved rope layout (true) is supported");

  c.tie_word_embeddings = t.has("tie_word_embeddings") ? t.req_bool("tie_word_embeddings")
                                                       : root.opt_bool("tie_word_embeddings", false);
  const JsonFields& ids = t.has("bos_token_id") || t.has("eos_token_id") ? t : root;
  c.bos_token_id = ids.opt_int("bos_token_id", -1);
  if (ids.has("eos_token_id")) {
    const auto& eos = ids.json().at("eos_token_id");
    if (eos.is_array())
      c.eos_token_ids = ids.req_int_list("eos_token_id");
    else
      c.eos_token_ids = {ids.req_int("eos_token_id")};
  }
  for (int64_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size)
      ids.fail("eos_token_id", "token id " + std::to_string(id) + " outside the vocabulary");
  if (c.bos_token_id >= c.vocab_size)
    ids.fail("bos_token_id", "token id " + std::to_string(c.bos_token_id) + " outside the vocabulary");

  if (auto q = t.opt_object("quantization_config"))
    c.quant = parse_quant(*q);
  else if (auto rq = root.opt_object("quantization_config"))
    c.quant = parse_quant(*rq);
  return c;
}

}  // namespace

bool is_quantized(const QuantConfig& q, const std::string& module_name) {
  if (!q.enabled) return false;
  for (const auto& pattern : q.ignore) {
    if (pattern.rfind("re:", 0) == 0) {
      // compressed-tensors matches "re:" patterns with Python's re.match: anchored at the start.
      if (ignore_pattern(pattern).matches_prefix(module_name)) return false;
    } else if (pattern == module_name) {
      return false;
    }
  }
  return true;
}

ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source) {
  JsonFields root(j, source);
  std::string type = root.req_string("model_type");
  ModelConfig c;
  if (type == kWrapperType) {
    // Multimodal wrapper: kplan compiles the language model in text_config only (the vision
    // tower and projector are not compiled); its tensors carry the "language_model." prefix.
    JsonFields text = root.req_object("text_config");
    std::string text_type = text.req_string("model_type");
    if (!is_text_model_type(text_type))
      text.fail("model_type", "unsupported text model type '" + text_type + "' (kplan supports deepseek_v3 and kimi_k2)");
    c = parse_text_model(text, root);
    c.model_type = text_type;
    c.wrapper_type = kWrapperType;
    c.tensor_prefix = kWrapperTensorPrefix;
  } else if (is_text_model_type(type)) {
    c = parse_text_model(root, root);
    c.model_type = type;
  } else {
    root.fail("model_type", "unsupported model type '" + type + "' (kplan supports deepseek_v3, kimi_k2, kimi_k25)");
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  return parse_model_config(read_json_file(config_json.string()), config_json.string());
}

void slice_layers(ModelConfig& c, int64_t layers) {
  if (layers < 1 || layers > c.num_hidden_layers)
    throw Error("--layers " + std::to_string(layers) + ": a slice keeps 1 to num_hidden_layers (" +
                std::to_string(c.num_hidden_layers) + ") layers");
  c.num_hidden_layers = layers;
  // Fewer layers than the dense prefix: all of them dense, as they are in the full model.
  c.first_k_dense_replace = std::min(c.first_k_dense_replace, layers);
}

nlohmann::json model_config_to_json(const ModelConfig& c) {
  nlohmann::json j;
  j["architectures"] = {"DeepseekV3ForCausalLM"};
  j["model_type"] = "deepseek_v3";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_nextn_predict_layers"] = 0;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["q_lora_rank"] = c.q_lora_rank ? nlohmann::json(*c.q_lora_rank) : nlohmann::json(nullptr);
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["n_routed_experts"] = c.n_routed_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["n_shared_experts"] = c.n_shared_experts;
  j["first_k_dense_replace"] = c.first_k_dense_replace;
  j["moe_layer_freq"] = c.moe_layer_freq;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["scoring_func"] = c.scoring_func;
  j["topk_method"] = c.topk_method;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["hidden_act"] = c.hidden_act;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  // Checkpoints keep the rope slices in DeepSeek's interleaved (GPT-J pair) layout.
  j["rope_interleave"] = true;
  j["rope_scaling"] = rope_scaling_to_json(c.rope_scaling);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty())
    j["eos_token_id"] = c.eos_token_ids;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = "bfloat16";
  j["dtype"] = "bfloat16";
  if (c.quant.enabled) {
    const QuantConfig& q = c.quant;
    nlohmann::json weights = {{"num_bits", q.num_bits},     {"type", "int"},
                              {"symmetric", q.symmetric},   {"strategy", "group"},
                              {"group_size", q.group_size}, {"dynamic", false},
                              {"actorder", nullptr},        {"block_structure", nullptr},
                              {"observer", "minmax"},       {"observer_kwargs", nlohmann::json::object()}};
    j["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", q.format.empty() ? std::string("pack-quantized") : q.format},
        {"quantization_status", "compressed"},
        {"kv_cache_scheme", nullptr},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"input_activations", nullptr},
            {"output_activations", nullptr},
            {"weights", weights}}}}},
        {"ignore", q.ignore}};
  }
  return j;
}

}  // namespace kplan
