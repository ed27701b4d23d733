// config.json parsing of the target model: the test presets, transformers-5 rope_parameters,
// the real Kimi K2.6 config (kimi_k25 wrapper), round trip through model_config_to_json, and one
// clear error per class of bad config.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "compiler/frontend/model_config.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

TEST(ModelConfig, ParsesTiny) {
  ModelConfig c = load_model_config(data_path("configs/tiny.json"));
  EXPECT_EQ(c.model_type, "deepseek_v3");
  EXPECT_EQ(c.wrapper_type, "");
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.num_attention_heads, 4);
  ASSERT_TRUE(c.q_lora_rank.has_value());
  EXPECT_EQ(*c.q_lora_rank, 128);
  EXPECT_EQ(c.kv_lora_rank, 64);
  EXPECT_EQ(c.qk_head_dim(), 48);
  EXPECT_EQ(c.v_head_dim, 32);
  EXPECT_EQ(c.n_routed_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1}));
  EXPECT_FALSE(c.quant.enabled);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_DOUBLE_EQ(c.softmax_scale(), 1.0 / std::sqrt(48.0));
}

TEST(ModelConfig, ParsesTiny2WithNullQLoraAndEosList) {
  ModelConfig c = load_model_config(data_path("configs/tiny2.json"));
  EXPECT_FALSE(c.q_lora_rank.has_value());
  EXPECT_EQ(c.num_key_value_heads, 6);  // defaults to num_attention_heads
  EXPECT_EQ(c.first_k_dense_replace, 2);
  EXPECT_FALSE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(2));
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5000.0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(c.scoring_func, "sigmoid");
  EXPECT_EQ(c.topk_method, "noaux_tc");
}

TEST(ModelConfig, ParsesTransformers5RopeParameters) {
  ModelConfig c = load_model_config(data_path("configs/tiny-yarn-rope-parameters.json"));
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 128);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  double m = 0.1 * std::log(4.0) + 1.0;
  EXPECT_DOUBLE_EQ(c.softmax_scale(), m * m / std::sqrt(48.0));
}

TEST(ModelConfig, RopeScalingAcceptsTypeOrRopeTypeKey) {
  nlohmann::json j = load_json("configs/tiny.json");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 128}};
  ModelConfig a = parse_model_config(j, "a.json");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 128}};
  ModelConfig b = parse_model_config(j, "b.json");
  EXPECT_EQ(a.rope_scaling.type, "yarn");
  EXPECT_EQ(b.rope_scaling.type, "yarn");
  // Without mscale_all_dim the softmax scale keeps qk_head_dim^-0.5 (transformers' rule).
  EXPECT_DOUBLE_EQ(a.rope_scaling.mscale_all_dim, 0.0);
  EXPECT_DOUBLE_EQ(a.softmax_scale(), 1.0 / std::sqrt(48.0));
  j["rope_scaling"] = {{"type", "default"}};
  EXPECT_EQ(parse_model_config(j, "c.json").rope_scaling.type, "none");
}

TEST(ModelConfig, ParsesRealKimiK26Config) {
  ModelConfig c = load_model_config(data_path("kimi-k2.6/config.json"));
  EXPECT_EQ(c.wrapper_type, "kimi_k25");
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.tensor_prefix, "language_model.");
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(*c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.827);
  EXPECT_DOUBLE_EQ(c.rope_theta, 50000.0);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 64.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.bos_token_id, 163584);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{163585}));
  double m = 0.1 * std::log(64.0) + 1.0;
  EXPECT_NEAR(c.softmax_scale(), m * m / std::sqrt(192.0), 1e-15);
  EXPECT_NEAR(c.softmax_scale(), 0.144680, 1e-6);  // 1.41589^2 / 13.8564

  ASSERT_TRUE(c.quant.enabled);
  EXPECT_EQ(c.quant.format, "pack-quantized");
  EXPECT_EQ(c.quant.num_bits, 4);
  EXPECT_EQ(c.quant.group_size, 32);
  EXPECT_TRUE(c.quant.symmetric);
  const std::string p = c.tensor_prefix;
  EXPECT_TRUE(is_quantized(c.quant, p + "model.layers.1.mlp.experts.0.gate_proj"));
  EXPECT_TRUE(is_quantized(c.quant, p + "model.layers.60.mlp.experts.383.down_proj"));
  EXPECT_FALSE(is_quantized(c.quant, p + "model.layers.1.self_attn.q_a_proj"));
  EXPECT_FALSE(is_quantized(c.quant, p + "model.layers.1.self_attn.kv_b_proj"));
  EXPECT_FALSE(is_quantized(c.quant, p + "model.layers.1.mlp.shared_experts.up_proj"));
  EXPECT_FALSE(is_quantized(c.quant, p + "model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(is_quantized(c.quant, p + "model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(is_quantized(c.quant, p + "lm_head"));
  EXPECT_FALSE(is_quantized(c.quant, "vision_tower.blocks.0.mlp.fc0"));
}

TEST(ModelConfig, ParsesTextOnlyKimiK2WithoutPrefix) {
  // K2 / K2-Thinking ship the text model at the top level: model_type kimi_k2, no prefix.
  nlohmann::json text = load_json("kimi-k2.6/config.json")["text_config"];
  ModelConfig c = parse_model_config(text, "k2/config.json");
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.wrapper_type, "");
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_TRUE(c.quant.enabled);
  EXPECT_TRUE(is_quantized(c.quant, "model.layers.5.mlp.experts.9.up_proj"));
  EXPECT_FALSE(is_quantized(c.quant, "model.layers.5.self_attn.o_proj"));
}

TEST(QuantConfig, IgnoreMatchesExactNamesAndAnchoredRegexes) {
  QuantConfig q;
  q.enabled = true;
  q.ignore = {"lm_head", "re:model\\.layers\\.0\\..*"};
  EXPECT_FALSE(is_quantized(q, "lm_head"));
  EXPECT_TRUE(is_quantized(q, "x.lm_head"));  // exact names match exactly
  EXPECT_FALSE(is_quantized(q, "model.layers.0.mlp.experts.1.up_proj"));
  // compressed-tensors uses Python's re.match: anchored at the start of the module name.
  EXPECT_TRUE(is_quantized(q, "language_model.model.layers.0.mlp.experts.1.up_proj"));
  EXPECT_TRUE(is_quantized(q, "model.layers.1.mlp.experts.1.up_proj"));
  q.enabled = false;
  EXPECT_FALSE(is_quantized(q, "model.layers.1.mlp.experts.1.up_proj"));
}

TEST(QuantConfig, AnIgnorePatternThatHitsTheMatchLimitIsAnErrorNotANoMatch) {
  QuantConfig q;
  q.enabled = true;
  q.ignore = {"re:(.|..)*\\d{5}$"};  // exponential backtracking on a name not ending in 5 digits
  EXPECT_FALSE(is_quantized(q, "m.12345"));  // matched: ignored, not quantized
  const std::string error = testing_util::error_of([&] { is_quantized(q, "model.layers.12.mlp.experts.101.up_proj"); });
  testing_util::expect_contains(error, {"quantization_config.ignore", "re:(.|..)*\\d{5}$", "model.layers.12", "limit"});
}

TEST(ModelConfig, QuantizationConfigAtTopLevelOrInTextConfig) {
  nlohmann::json k = load_json("kimi-k2.6/config.json");
  k["text_config"].erase("quantization_config");
  EXPECT_TRUE(parse_model_config(k, "top.json").quant.enabled);
  k.erase("quantization_config");
  EXPECT_FALSE(parse_model_config(k, "none.json").quant.enabled);
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
  EXPECT_EQ(a.kv_lora_rank, b.kv_lora_rank);
  EXPECT_EQ(a.qk_nope_head_dim, b.qk_nope_head_dim);
  EXPECT_EQ(a.qk_rope_head_dim, b.qk_rope_head_dim);
  EXPECT_EQ(a.v_head_dim, b.v_head_dim);
  EXPECT_EQ(a.n_routed_experts, b.n_routed_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.n_shared_experts, b.n_shared_experts);
  EXPECT_EQ(a.first_k_dense_replace, b.first_k_dense_replace);
  EXPECT_EQ(a.moe_layer_freq, b.moe_layer_freq);
  EXPECT_DOUBLE_EQ(a.routed_scaling_factor, b.routed_scaling_factor);
  EXPECT_EQ(a.n_group, b.n_group);
  EXPECT_EQ(a.topk_group, b.topk_group);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_DOUBLE_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings, b.rope_scaling.original_max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rope_scaling.beta_fast, b.rope_scaling.beta_fast);
  EXPECT_DOUBLE_EQ(a.rope_scaling.beta_slow, b.rope_scaling.beta_slow);
  EXPECT_DOUBLE_EQ(a.rope_scaling.mscale, b.rope_scaling.mscale);
  EXPECT_DOUBLE_EQ(a.rope_scaling.mscale_all_dim, b.rope_scaling.mscale_all_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.quant.enabled, b.quant.enabled);
  EXPECT_EQ(a.quant.num_bits, b.quant.num_bits);
  EXPECT_EQ(a.quant.group_size, b.quant.group_size);
  EXPECT_EQ(a.quant.ignore, b.quant.ignore);
  EXPECT_DOUBLE_EQ(a.softmax_scale(), b.softmax_scale());
}

TEST(ModelConfig, ToJsonRoundTripsInDeepseekV3Layout) {
  for (const char* file : {"configs/tiny.json", "configs/tiny2.json", "configs/tiny-yarn-rope-parameters.json",
                           "kimi-k2.6/config.json"}) {
    SCOPED_TRACE(file);
    ModelConfig a = load_model_config(data_path(file));
    nlohmann::json j = model_config_to_json(a);
    EXPECT_EQ(j["model_type"], "deepseek_v3");
    EXPECT_EQ(j["architectures"], nlohmann::json::array({"DeepseekV3ForCausalLM"}));
    EXPECT_EQ(j["torch_dtype"], "bfloat16");
    EXPECT_TRUE(j.contains("rope_scaling"));
    EXPECT_EQ(j["rope_scaling"].is_null(), a.rope_scaling.type == "none");
    EXPECT_EQ(j.contains("quantization_config"), a.quant.enabled);
    ModelConfig b = parse_model_config(j, "roundtrip.json");
    EXPECT_EQ(b.model_type, "deepseek_v3");
    EXPECT_EQ(b.tensor_prefix, "");
    expect_same(a, b);
  }
}

TEST(ModelConfig, ToJsonWritesCompressedTensorsLayout) {
  ModelConfig c = load_model_config(data_path("kimi-k2.6/config.json"));
  nlohmann::json q = model_config_to_json(c)["quantization_config"];
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "pack-quantized");
  const auto& w = q["config_groups"]["group_0"]["weights"];
  EXPECT_EQ(w["num_bits"], 4);
  EXPECT_EQ(w["group_size"], 32);
  EXPECT_EQ(w["strategy"], "group");
  EXPECT_EQ(w["symmetric"], true);
  EXPECT_EQ(q["config_groups"]["group_0"]["targets"], nlohmann::json::array({"Linear"}));
  EXPECT_EQ(q["ignore"].size(), 6u);
}

// One bad-config class: a change to tiny.json and the fragments its error must contain.
struct BadConfigCase {
  const char* name;
  std::function<void(nlohmann::json&)> mutate;
  std::vector<std::string> expected;
};

nlohmann::json kimi_quant() { return load_json("kimi-k2.6/config.json")["quantization_config"]; }

TEST(ModelConfig, EachBadConfigClassHasItsOwnError) {
  const std::vector<BadConfigCase> cases = {
      {"unknown model type", [](auto& j) { j["model_type"] = "llama"; },
       {"field 'model_type'", "unsupported model type 'llama'"}},
      {"scoring func", [](auto& j) { j["scoring_func"] = "softmax"; },
       {"field 'scoring_func'", "'softmax'"}},
      {"topk method", [](auto& j) { j["topk_method"] = "greedy"; }, {"field 'topk_method'", "'greedy'"}},
      {"hidden act", [](auto& j) { j["hidden_act"] = "gelu"; }, {"field 'hidden_act'", "'gelu'"}},
      {"rope type", [](auto& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; },
       {"field 'rope_scaling.type'", "unsupported rope type 'linear'"}},
      {"rope_parameters type",
       [](auto& j) { j["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e4}}; },
       {"field 'rope_parameters.rope_type'", "'dynamic'"}},
      {"yarn without factor",
       [](auto& j) { j["rope_scaling"] = {{"type", "yarn"}, {"original_max_position_embeddings", 128}}; },
       {"field 'rope_scaling.factor'", "missing required field"}},
      {"yarn factor inconsistent",
       [](auto& j) { j["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", 128}}; },
       {"field 'rope_scaling.factor'", "disagrees"}},
      {"rope type missing", [](auto& j) { j["rope_scaling"] = {{"factor", 2.0}}; },
       {"field 'rope_scaling.rope_type'", "missing"}},
      {"quant method",
       [](auto& j) { j["quantization_config"] = kimi_quant(); j["quantization_config"]["quant_method"] = "gptq"; },
       {"field 'quantization_config.quant_method'", "'gptq'"}},
      {"quant format",
       [](auto& j) { j["quantization_config"] = kimi_quant(); j["quantization_config"]["format"] = "float-quantized"; },
       {"field 'quantization_config.format'", "'float-quantized'"}},
      {"quant bits",
       [](auto& j) {
         j["quantization_config"] = kimi_quant();
         j["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 8;
       },
       {"field 'quantization_config.config_groups.group_0.weights.num_bits'", "4-bit"}},
      // Issue 12: 2^32 + 4 was accepted as 4 (narrowed to int before the check).
      {"quant bits past 32 bits",
       [](auto& j) {
         j["quantization_config"] = kimi_quant();
         j["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = (int64_t{1} << 32) + 4;
       },
       {"field 'quantization_config.config_groups.group_0.weights.num_bits'", "4-bit", "4294967300"}},
      {"quant group size past 32 bits",
       [](auto& j) {
         j["quantization_config"] = kimi_quant();
         j["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = (int64_t{1} << 32) + 32;
       },
       {"weights.group_size'", "4294967328"}},
      {"quant asymmetric",
       [](auto& j) {
         j["quantization_config"] = kimi_quant();
         j["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
       },
       {"weights.symmetric'", "asymmetric"}},
      {"quant strategy",
       [](auto& j) {
         j["quantization_config"] = kimi_quant();
         j["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "channel";
       },
       {"weights.strategy'", "'channel'"}},
      {"quant activations",
       [](auto& j) {
         j["quantization_config"] = kimi_quant();
         j["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}};
       },
       {"input_activations'", "activation quantization"}},
      {"experts not divisible by groups", [](auto& j) { j["n_group"] = 3; j["topk_group"] = 1; },
       {"field 'n_group'", "not divisible"}},
      {"topk_group above n_group", [](auto& j) { j["topk_group"] = 2; }, {"field 'topk_group'", "exceeds n_group"}},
      {"top-k above experts", [](auto& j) { j["num_experts_per_tok"] = 9; },
       {"field 'num_experts_per_tok'", "exceeds n_routed_experts"}},
      {"odd rope dim", [](auto& j) { j["qk_rope_head_dim"] = 15; }, {"field 'qk_rope_head_dim'", "even"}},
      {"missing field", [](auto& j) { j.erase("hidden_size"); }, {"field 'hidden_size'", "missing required field"}},
      {"missing q_lora_rank", [](auto& j) { j.erase("q_lora_rank"); }, {"field 'q_lora_rank'", "missing"}},
      {"wrong type int", [](auto& j) { j["hidden_size"] = "256"; },
       {"field 'hidden_size'", "expected an integer, got string"}},
      {"wrong type fraction", [](auto& j) { j["kv_lora_rank"] = 64.5; },
       {"field 'kv_lora_rank'", "expected an integer"}},
      {"wrong type bool", [](auto& j) { j["norm_topk_prob"] = 1; },
       {"field 'norm_topk_prob'", "expected true or false"}},
      {"wrong type number", [](auto& j) { j["routed_scaling_factor"] = "2.5"; },
       {"field 'routed_scaling_factor'", "expected a number"}},
      {"wrong type eos", [](auto& j) { j["eos_token_id"] = "</s>"; }, {"field 'eos_token_id'", "expected an integer"}},
      {"eos outside vocab", [](auto& j) { j["eos_token_id"] = nlohmann::json::array({1, 5000}); },
       {"field 'eos_token_id'", "outside the vocabulary"}},
      {"negative dim", [](auto& j) { j["v_head_dim"] = 0; }, {"field 'v_head_dim'", "must be positive"}},
      {"giant layer count", [](auto& j) { j["num_hidden_layers"] = 99999999997; },
       {"field 'num_hidden_layers'", "99999999997 is more layers than kplan builds (at most 100000"}},
      {"moe layer freq", [](auto& j) { j["moe_layer_freq"] = 2; }, {"field 'moe_layer_freq'"}},
      {"kv heads", [](auto& j) { j["num_key_value_heads"] = 2; }, {"field 'num_key_value_heads'"}},
      {"attention bias", [](auto& j) { j["attention_bias"] = true; }, {"field 'attention_bias'"}},
      {"rope interleave", [](auto& j) { j["rope_interleave"] = false; }, {"field 'rope_interleave'"}},
      {"wrapper without text_config",
       [](auto& j) { j = nlohmann::json{{"model_type", "kimi_k25"}}; }, {"field 'text_config'", "missing"}},
      {"wrapper with unknown text model",
       [](auto& j) { j = nlohmann::json{{"model_type", "kimi_k25"}, {"text_config", {{"model_type", "qwen2"}}}}; },
       {"field 'text_config.model_type'", "'qwen2'"}},
      {"not an object", [](auto& j) { j = nlohmann::json::array({1, 2}); }, {"top level", "expected an object"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    nlohmann::json j = load_json("configs/tiny.json");
    c.mutate(j);
    std::string msg = error_of([&] { parse_model_config(j, "bad/config.json"); });
    EXPECT_EQ(msg.rfind("bad/config.json: ", 0), 0u) << msg;
    for (const auto& e : c.expected) expect_contains(msg, {e});
  }
}

TEST(ModelConfig, BadTextConfigFieldNamesItsPath) {
  nlohmann::json k = load_json("kimi-k2.6/config.json");
  k["text_config"]["scoring_func"] = "softmax";
  expect_contains(error_of([&] { parse_model_config(k, "k.json"); }), {"field 'text_config.scoring_func'"});
}

TEST(ModelConfig, BadJsonNamesTheFile) {
  const auto path = data_path("configs/bad-json-truncated.json");
  std::string msg = error_of([&] { load_model_config(path); });
  expect_contains(msg, {path.string(), "bad JSON"});
}

TEST(ModelConfig, MissingFileNamesTheFile) {
  std::string msg = error_of([&] { load_model_config(data_path("configs/no-such-config.json")); });
  expect_contains(msg, {"no-such-config.json", "cannot open"});
  expect_contains(error_of([&] { load_model_config(data_path("configs")); }), {"configs", "is a directory"});
}

}  // namespace
}  // namespace kplan
