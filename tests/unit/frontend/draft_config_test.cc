// The DFlash drafter's config.json: dflash_config or top-level fields, rope_parameters, round
// trip, refusals by name, and the checks that it fits its target.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "compiler/frontend/draft_config.h"
#include "ir/support/yarn.h"
#include "schemas/model_spec_table.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

TEST(DraftConfig, ParsesDflashConfig) {
  DraftConfig d = load_draft_config(data_path("configs/draft-tiny.json"));
  EXPECT_EQ(d.model_type, "qwen3");
  EXPECT_EQ(d.hidden_size, 256);
  EXPECT_EQ(d.num_hidden_layers, 2);
  EXPECT_EQ(d.num_attention_heads, 4);
  EXPECT_EQ(d.num_key_value_heads, 2);
  EXPECT_EQ(d.head_dim, 64);
  EXPECT_EQ(d.intermediate_size, 512);
  EXPECT_EQ(d.vocab_size, 1024);
  EXPECT_EQ(d.num_target_layers, 4);
  EXPECT_EQ(d.block_size, 8);
  EXPECT_EQ(d.mask_token_id, 1023);
  EXPECT_EQ(d.target_layer_ids, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(d.rope_scaling.type, "none");
  EXPECT_DOUBLE_EQ(d.rope_theta, 10000.0);
}

TEST(DraftConfig, ParsesTopLevelFieldsAndRopeParameters) {
  DraftConfig d = load_draft_config(data_path("configs/draft-toplevel-fields.json"));
  EXPECT_EQ(d.head_dim, 40);
  EXPECT_EQ(d.block_size, 8);
  EXPECT_EQ(d.mask_token_id, 1000);
  EXPECT_EQ(d.target_layer_ids, (std::vector<int64_t>{1, 3, 5}));
  EXPECT_DOUBLE_EQ(d.rope_theta, 5000.0);
  EXPECT_EQ(d.rope_scaling.type, "none");
}

TEST(DraftConfig, RoundTripsThroughJson) {
  DraftConfig a = load_draft_config(data_path("configs/draft-tiny.json"));
  a.rope_scaling.type = "yarn";
  a.rope_scaling.factor = 4.0;
  a.rope_scaling.original_max_position_embeddings = 128;
  a.rope_scaling.mscale_all_dim = 1.0;
  nlohmann::json j = draft_config_to_json(a);
  EXPECT_EQ(j["dflash_config"]["target_layer_ids"], nlohmann::json::array({1, 3}));
  DraftConfig b = parse_draft_config(j, "roundtrip.json");
  EXPECT_EQ(b.hidden_size, a.hidden_size);
  EXPECT_EQ(b.num_hidden_layers, a.num_hidden_layers);
  EXPECT_EQ(b.num_attention_heads, a.num_attention_heads);
  EXPECT_EQ(b.num_key_value_heads, a.num_key_value_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.intermediate_size, a.intermediate_size);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_DOUBLE_EQ(b.rms_norm_eps, a.rms_norm_eps);
  EXPECT_DOUBLE_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(b.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(b.rope_scaling.factor, 4.0);
  EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
  EXPECT_EQ(b.num_target_layers, a.num_target_layers);
  EXPECT_EQ(b.block_size, a.block_size);
  EXPECT_EQ(b.target_layer_ids, a.target_layer_ids);
  EXPECT_EQ(b.mask_token_id, a.mask_token_id);
}

TEST(DraftConfig, EachBadConfigClassHasItsOwnError) {
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> mutate;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"model type", [](auto& j) { j["model_type"] = "llama"; }, {"field 'model_type'", "'llama'"}},
      {"dflash2", [](auto& j) { j["architectures"] = {"DFlash2DraftModel"}; }, {"field 'architectures'", "DFlash2DraftModel"}},
      {"dflash2 fields", [](auto& j) { j["dflash_config"]["selector_rank"] = 256; },
       {"field 'dflash_config.selector_rank'", "DFlash2"}},
      {"softcap", [](auto& j) { j["dflash_config"]["final_logit_softcapping"] = 20.0; },
       {"field 'dflash_config.final_logit_softcapping'"}},
      {"causal", [](auto& j) { j["is_causal"] = true; }, {"field 'is_causal'"}},
      {"sliding", [](auto& j) { j["layer_types"] = {"sliding_attention", "sliding_attention"}; },
       {"field 'layer_types'", "sliding_attention"}},
      {"missing block size", [](auto& j) { j["dflash_config"].erase("block_size"); },
       {"field 'block_size'", "missing required field"}},
      {"block size 1", [](auto& j) { j["dflash_config"]["block_size"] = 1; },
       {"field 'dflash_config.block_size'", "at least 2"}},
      {"block size past the positions", [](auto& j) { j["dflash_config"]["block_size"] = 1000000000; },
       {"field 'dflash_config.block_size'", "1000000000 is more than max_position_embeddings"}},
      {"missing layer ids and target layers",
       [](auto& j) {
         j["dflash_config"].erase("target_layer_ids");
         j.erase("num_target_layers");
       },
       {"field 'num_target_layers'", "missing required field", "derived from it"}},
      // Found by tests/fuzz (draft_config): 2 target layers derived the ids {1, -1}, accepted here.
      {"layer ids derived from too few target layers",
       [](auto& j) {
         j["dflash_config"].erase("target_layer_ids");
         j["num_target_layers"] = 2;
       },
       {"field 'num_target_layers'", "2 is too few to derive target_layer_ids for 2 drafter layers"}},
      // Found by tests/fuzz (draft_config): 10^11 drafter layers with the ids derived asked for
      // 2 GiB of tap ids (libFuzzer: out of memory), before any per-layer check.
      {"giant layer count",
       [](auto& j) {
         j["dflash_config"].erase("target_layer_ids");
         j["num_hidden_layers"] = 99999999997;
       },
       {"field 'num_hidden_layers'", "99999999997 is more drafter layers than kplan builds (at most 100000"}},
      {"layer ids type", [](auto& j) { j["dflash_config"]["target_layer_ids"] = {1, "3"}; },
       {"field 'dflash_config.target_layer_ids'", "element 1"}},
      {"empty layer ids", [](auto& j) { j["dflash_config"]["target_layer_ids"] = nlohmann::json::array(); },
       {"field 'dflash_config.target_layer_ids'", "empty"}},
      {"mask outside vocab", [](auto& j) { j["dflash_config"]["mask_token_id"] = 1024; },
       {"field 'dflash_config.mask_token_id'", "outside"}},
      {"gqa", [](auto& j) { j["num_key_value_heads"] = 3; }, {"field 'num_key_value_heads'"}},
      {"odd head dim", [](auto& j) { j["head_dim"] = 63; }, {"field 'head_dim'", "even"}},
      {"rope type", [](auto& j) { j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; },
       {"field 'rope_scaling.rope_type'", "'llama3'"}},
      {"wrong type", [](auto& j) { j["hidden_size"] = 256.5; }, {"field 'hidden_size'", "expected an integer"}},
      {"dflash_config type", [](auto& j) { j["dflash_config"] = "x"; }, {"field 'dflash_config'", "expected an object"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    nlohmann::json j = load_json("configs/draft-tiny.json");
    c.mutate(j);
    std::string msg = error_of([&] { parse_draft_config(j, "draft/config.json"); });
    EXPECT_EQ(msg.rfind("draft/config.json: ", 0), 0u) << msg;
    for (const auto& e : c.expected) expect_contains(msg, {e});
  }
}

TEST(DraftConfig, FitsItsTarget) {
  ModelConfig target = load_model_config(data_path("configs/tiny.json"));
  DraftConfig d = load_draft_config(data_path("configs/draft-tiny.json"));
  EXPECT_NO_THROW(check_draft_fits_target(d, target));

  struct Case {
    const char* name;
    std::function<void(DraftConfig&)> mutate;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"hidden", [](DraftConfig& x) { x.hidden_size = 128; }, "hidden_size 128 != target hidden_size 256"},
      {"vocab", [](DraftConfig& x) { x.vocab_size = 2048; }, "vocab_size 2048 != target vocab_size 1024"},
      {"layer id", [](DraftConfig& x) { x.target_layer_ids = {1, 4}; }, "target_layer_ids entry 4"},
      {"num target layers", [](DraftConfig& x) { x.num_target_layers = 61; }, "num_target_layers 61"},
      {"mask", [](DraftConfig& x) { x.mask_token_id = 1024; }, "mask_token_id 1024"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    DraftConfig x = d;
    c.mutate(x);
    expect_contains(error_of([&] { check_draft_fits_target(x, target); }), {"drafter does not fit", c.expected});
  }
}

TEST(DraftConfig, Tiny2DrafterFitsTiny2) {
  ModelConfig target = load_model_config(data_path("configs/tiny2.json"));
  DraftConfig d = load_draft_config(data_path("configs/draft-toplevel-fields.json"));
  EXPECT_NO_THROW(check_draft_fits_target(d, target));
}

// --- Real-format drafter configs (issue 9 item 3): the published K2.6 layouts, every accepted
// key shown to change the parsed result where it should, every refused key named. ---

nlohmann::json k26_zlab() { return load_json("kimi-k2.6-dflash/config.json"); }
nlohmann::json k26_modelopt() { return load_json("kimi-k2.6-dflash-modelopt/config.json"); }
DraftConfig parse(const nlohmann::json& j, const std::optional<SpecialTokenLookup>& tokens = std::nullopt) {
  return parse_draft_config(j, "draft/config.json", tokens);
}

TEST(DraftConfigReal, KimiK26ZLabLayout) {
  DraftConfig d = parse(k26_zlab());
  EXPECT_EQ(d.hidden_size, 7168);
  EXPECT_EQ(d.num_hidden_layers, 6);
  EXPECT_EQ(d.num_attention_heads, 64);
  EXPECT_EQ(d.num_key_value_heads, 8);
  EXPECT_EQ(d.head_dim, 128);
  EXPECT_EQ(d.vocab_size, 163840);
  EXPECT_EQ(d.num_target_layers, 61);
  EXPECT_EQ(d.block_size, 8);
  EXPECT_EQ(d.target_layer_ids, (std::vector<int64_t>{1, 12, 24, 35, 47, 58}));
  EXPECT_EQ(d.mask_token_id, 163838);
  EXPECT_DOUBLE_EQ(d.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(d.rope_theta, 50000.0);
  EXPECT_EQ(d.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(d.rope_scaling.factor, 64.0);
  EXPECT_EQ(d.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_FALSE(d.rope_scaling.attention_factor);
  EXPECT_FALSE(d.sliding_window);
  ModelConfig k26 = load_model_config(data_path("kimi-k2.6/config.json"));
  EXPECT_NO_THROW(check_draft_fits_target(d, k26));
}

// Model-Optimizer's export of the same drafter (num_target_layers and causal: false inside
// dflash_config, rope_parameters) parses to the same config.
TEST(DraftConfigReal, KimiK26ModelOptLayoutIsTheSameDrafter) {
  EXPECT_EQ(parse(k26_modelopt()), parse(k26_zlab()));
}

// The model fields nested in text_config (dflash_config and architectures at the top) read the
// same; a nested dflash_config too.
TEST(DraftConfigReal, TextConfigNesting) {
  nlohmann::json flat = k26_modelopt();
  nlohmann::json nested = {{"architectures", flat["architectures"]}, {"dflash_config", flat["dflash_config"]},
                           {"block_size", flat["block_size"]}};
  flat.erase("dflash_config");
  flat.erase("block_size");
  nested["text_config"] = flat;
  EXPECT_EQ(parse(nested), parse(k26_modelopt()));
  nlohmann::json inner = nested;
  inner["text_config"]["dflash_config"] = inner["dflash_config"];
  inner.erase("dflash_config");
  EXPECT_EQ(parse(inner), parse(k26_modelopt()));
  nested["text_config"]["rms_norm_eps"] = 1e-6;  // the nested object is the one read
  EXPECT_DOUBLE_EQ(parse(nested).rms_norm_eps, 1e-6);
}

TEST(DraftConfigReal, AcceptedKeysChangeTheResult) {
  {  // dflash_config.num_target_layers (ModelOpt) vs the top level (z-lab): dflash_config first
    nlohmann::json j = k26_modelopt();
    j["dflash_config"]["num_target_layers"] = 60;
    EXPECT_EQ(parse(j).num_target_layers, 60);
    j["num_target_layers"] = 61;
    EXPECT_EQ(parse(j).num_target_layers, 60);
  }
  {  // block_size: dflash_config wins over the top level
    nlohmann::json j = k26_zlab();
    j["dflash_config"]["block_size"] = 16;
    EXPECT_EQ(parse(j).block_size, 16);
  }
  {  // YaRN amplitude: an explicit attention_factor, in rope_scaling or rope_parameters
    nlohmann::json j = k26_zlab();
    j["rope_scaling"]["attention_factor"] = 1.25;
    EXPECT_EQ(parse(j).rope_scaling.attention_factor, 1.25);
    nlohmann::json m = k26_modelopt();
    m["rope_parameters"]["attention_factor"] = 1.5;
    EXPECT_EQ(parse(m).rope_scaling.attention_factor, 1.5);
  }
  {  // rms_norm_eps
    nlohmann::json j = k26_zlab();
    j["rms_norm_eps"] = 1e-6;
    EXPECT_DOUBLE_EQ(parse(j).rms_norm_eps, 1e-6);
  }
  {  // rope_theta inside rope_parameters (transformers 5) or rope_scaling
    nlohmann::json m = k26_modelopt();
    m["rope_parameters"]["rope_theta"] = 1e6;
    EXPECT_DOUBLE_EQ(parse(m).rope_theta, 1e6);
    nlohmann::json j = k26_zlab();
    j.erase("rope_theta");
    j["rope_scaling"]["rope_theta"] = 1e6;
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 1e6);
  }
  {  // sliding windows (vLLM's rule): use_swa with swa_window_size, else the top-level sliding_window
    nlohmann::json j = k26_modelopt();
    j["sliding_window"] = 2048;
    EXPECT_FALSE(parse(j).sliding_window);  // no use_swa: not applied
    j["dflash_config"]["use_swa"] = true;
    EXPECT_EQ(parse(j).sliding_window, 2048);
    j["dflash_config"]["swa_window_size"] = 4096;
    EXPECT_EQ(parse(j).sliding_window, 4096);
    j["dflash_config"]["use_swa"] = false;
    EXPECT_FALSE(parse(j).sliding_window);
  }
  {  // what changes nothing is accepted as such: causal false, is_neox_style true, partial 1
    nlohmann::json j = k26_zlab();
    j["dflash_config"]["causal"] = false;
    j["is_causal"] = false;
    j["is_neox_style"] = true;
    j["partial_rotary_factor"] = 1.0;
    j["rope_scaling"]["partial_rotary_factor"] = 1.0;
    j["attention_sink_bias"] = false;
    j["draft_vocab_size"] = 163840;
    j["target_hidden_size"] = 7168;
    j["quantization_config"] = nullptr;
    EXPECT_EQ(parse(j), parse(k26_zlab()));
  }
}

TEST(DraftConfigReal, TargetLayerIdsAreDerivedLikeTheReference) {
  EXPECT_EQ(derive_target_layer_ids(61, 6), (std::vector<int64_t>{1, 12, 24, 35, 47, 58}));  // K2.6's taps
  EXPECT_EQ(derive_target_layer_ids(36, 5), (std::vector<int64_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(derive_target_layer_ids(61, 1), (std::vector<int64_t>{30}));
  // Python's round: 1.5 -> 2, 2.5 -> 2, 3.5 -> 4, 4.5 -> 4.
  EXPECT_EQ(derive_target_layer_ids(8, 9), (std::vector<int64_t>{1, 2, 2, 2, 3, 4, 4, 4, 5}));
  nlohmann::json j = k26_zlab();
  j["dflash_config"].erase("target_layer_ids");
  EXPECT_EQ(parse(j), parse(k26_zlab()));
  j["num_target_layers"] = 36;
  j["num_hidden_layers"] = 5;
  j["layer_types"] = std::vector<std::string>(5, "full_attention");
  EXPECT_EQ(parse(j).target_layer_ids, (std::vector<int64_t>{1, 9, 17, 25, 33}));
  // Given ids need no num_target_layers (0: not checked against the target).
  nlohmann::json k = k26_zlab();
  k.erase("num_target_layers");
  EXPECT_EQ(parse(k).num_target_layers, 0);
  EXPECT_NO_THROW(check_draft_fits_target(parse(k), load_model_config(data_path("kimi-k2.6/config.json"))));
}

TEST(DraftConfigReal, MaskTokenStringIsResolvedByTheTargetsTokenizer) {
  SpecialTokenLookup tokens{"target/tokenizer_config.json", [](const std::string& t) -> std::optional<int64_t> {
                              if (t == "<|MASK|>") return 163838;
                              if (t == "<|im_end|>") return 163586;
                              return std::nullopt;
                            }};
  nlohmann::json j = k26_zlab();
  j["dflash_config"].erase("mask_token_id");
  j["dflash_config"]["mask_token"] = "<|MASK|>";
  EXPECT_EQ(parse(j, tokens).mask_token_id, 163838);
  j["dflash_config"]["mask_token"] = "<|im_end|>";
  EXPECT_EQ(parse(j, tokens).mask_token_id, 163586);
  expect_contains(error_of([&] { parse(j); }),
                  {"field 'dflash_config.mask_token'", "'<|im_end|>' is resolved by the target's tokenizer", "mask_token_id"});
  j["dflash_config"]["mask_token"] = "<|nope|>";
  expect_contains(error_of([&] { parse(j, tokens); }),
                  {"field 'dflash_config.mask_token'", "'<|nope|>' is not a special token of target/tokenizer_config.json"});
  // Both given: they must agree; without a tokenizer the id is used.
  j["dflash_config"]["mask_token_id"] = 163838;
  j["dflash_config"]["mask_token"] = "<|im_end|>";
  expect_contains(error_of([&] { parse(j, tokens); }), {"field 'dflash_config.mask_token'", "is id 163586", "mask_token_id is 163838"});
  EXPECT_EQ(parse(j).mask_token_id, 163838);
  j["dflash_config"]["mask_token"] = "<|MASK|>";
  EXPECT_EQ(parse(j, tokens).mask_token_id, 163838);
}

TEST(DraftConfigReal, TargetSpecialTokensReadTokenizerConfig) {
  TempDir dir("special-tokens");
  EXPECT_FALSE(target_special_tokens(dir.path()));
  std::ofstream(dir.path() / "tokenizer_config.json")
      << R"({"added_tokens_decoder": {"163838": {"content": "<|MASK|>", "special": true}, "163586": {"content": "<|im_end|>"}}})";
  std::optional<SpecialTokenLookup> t = target_special_tokens(dir.path());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->find("<|MASK|>"), 163838);
  EXPECT_EQ(t->find("<|im_end|>"), 163586);
  EXPECT_EQ(t->find("<|other|>"), std::nullopt);
}

TEST(DraftConfigReal, RefusedKeysAreNamed) {
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> mutate;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"causal (ModelOpt)", [](auto& j) { j["dflash_config"]["causal"] = true; }, {"field 'dflash_config.causal'", "causal"}},
      {"is_causal", [](auto& j) { j["is_causal"] = true; }, {"field 'is_causal'", "causal"}},
      {"sink (dflash_config)", [](auto& j) { j["dflash_config"]["attention_sink_bias"] = true; },
       {"field 'dflash_config.attention_sink_bias'", "sinks"}},
      {"sink (top level)", [](auto& j) { j["attention_sink_bias"] = true; }, {"field 'attention_sink_bias'", "sinks"}},
      {"sink (MiMo)", [](auto& j) { j["add_swa_attention_sink_bias"] = true; }, {"field 'add_swa_attention_sink_bias'"}},
      {"projector", [](auto& j) { j["dflash_config"]["projector_type"] = "domino"; },
       {"field 'dflash_config.projector_type'", "'domino'"}},
      {"dflash2 conv", [](auto& j) { j["dflash_config"]["conv_kernel_size"] = 4; }, {"field 'dflash_config.conv_kernel_size'", "DFlash2"}},
      {"dspark", [](auto& j) { j["dflash_config"]["markov_rank"] = 64; }, {"field 'dflash_config.markov_rank'"}},
      {"quantized", [](auto& j) { j["quantization_config"] = {{"quant_method", "modelopt"}}; },
       {"field 'quantization_config'", "quantized drafters"}},
      {"not neox", [](auto& j) { j["is_neox_style"] = false; }, {"field 'is_neox_style'", "interleaved"}},
      {"not neox (rope dict)", [](auto& j) { j["rope_scaling"]["is_neox_style"] = false; }, {"field 'rope_scaling.is_neox_style'"}},
      {"partial rotary", [](auto& j) { j["partial_rotary_factor"] = 0.5; }, {"field 'partial_rotary_factor'", "partial rotary"}},
      {"partial rotary (rope dict)", [](auto& j) { j["rope_scaling"]["partial_rotary_factor"] = 0.5; },
       {"field 'rope_scaling.partial_rotary_factor'"}},
      {"own vocabulary", [](auto& j) { j["draft_vocab_size"] = 32000; }, {"field 'draft_vocab_size'", "lm_head"}},
      {"own embedding tie", [](auto& j) { j["tie_word_embeddings"] = true; }, {"field 'tie_word_embeddings'"}},
      {"target hidden", [](auto& j) { j["target_hidden_size"] = 4096; }, {"field 'target_hidden_size'"}},
      {"no aux hidden", [](auto& j) { j["use_aux_hidden_state"] = false; }, {"field 'use_aux_hidden_state'"}},
      {"swa without window", [](auto& j) { j["dflash_config"]["use_swa"] = true; }, {"field 'dflash_config.use_swa'", "needs a window"}},
      {"swa window 0", [](auto& j) { j["dflash_config"]["use_swa"] = true; j["dflash_config"]["swa_window_size"] = 0; },
       {"field 'dflash_config.swa_window_size'", "positive"}},
      {"sliding layers", [](auto& j) { j["layer_types"][2] = "sliding_attention"; }, {"field 'layer_types'", "sliding_attention"}},
      {"qwen3 sliding", [](auto& j) { j["use_sliding_window"] = true; }, {"field 'use_sliding_window'"}},
      {"amplitude 0", [](auto& j) { j["rope_scaling"]["attention_factor"] = 0.0; }, {"field 'rope_scaling.attention_factor'", "positive"}},
      {"amplitude without yarn",
       [](auto& j) { j["rope_scaling"] = {{"rope_type", "default"}, {"attention_factor", 1.4}}; },
       {"field 'rope_scaling.attention_factor'", "needs rope type yarn"}},
      {"two rope thetas", [](auto& j) { j["rope_scaling"]["rope_theta"] = 1e6; },
       {"field 'rope_theta'", "disagrees with rope_scaling.rope_theta"}},
      {"dflash2 architecture", [](auto& j) { j["architectures"] = {"DFlash2DraftModel"}; }, {"field 'architectures'", "DFlash2DraftModel"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    nlohmann::json j = k26_zlab();
    c.mutate(j);
    std::string msg = error_of([&] { parse(j); });
    EXPECT_EQ(msg.rfind("draft/config.json: ", 0), 0u) << msg;
    for (const auto& e : c.expected) expect_contains(msg, {e});
  }
}

// A window is run only where it changes nothing: when it covers every position the plan's
// context reaches.
TEST(DraftConfigReal, SlidingWindowMustCoverThePlansContext) {
  ModelConfig k26 = load_model_config(data_path("kimi-k2.6/config.json"));
  nlohmann::json j = k26_modelopt();
  j["dflash_config"]["use_swa"] = true;
  j["dflash_config"]["swa_window_size"] = 4096;
  DraftConfig d = parse(j);
  expect_contains(error_of([&] { check_draft_fits_target(d, k26); }),
                  {"drafter does not fit the plan", "sliding window", "swa_window_size", "4096 positions",
                   "262144 positions the plan's context can reach"});
  EXPECT_NO_THROW(check_draft_fits_target(d, k26, 4096));
  expect_contains(error_of([&] { check_draft_fits_target(d, k26, 4097); }), {"4097 positions"});
  EXPECT_NO_THROW(check_draft_window(d, 1));
  d.sliding_window = 262144;
  EXPECT_NO_THROW(check_draft_fits_target(d, k26));
}

TEST(DraftConfigReal, YarnAmplitudeIsSelectable) {
  DraftConfig d = parse(k26_zlab());
  select_draft_yarn_amplitude(d, "config");
  EXPECT_FALSE(d.rope_scaling.attention_factor);  // the config's rule: mscale / mscale_all_dim = 1.0
  select_draft_yarn_amplitude(d, "legacy");
  ASSERT_TRUE(d.rope_scaling.attention_factor);
  EXPECT_DOUBLE_EQ(*d.rope_scaling.attention_factor, 1.0 + 0.1 * std::log(64.0));
  EXPECT_NEAR(*d.rope_scaling.attention_factor, 1.4159, 1e-4);
  select_draft_yarn_amplitude(d, "1.2");
  EXPECT_EQ(d.rope_scaling.attention_factor, 1.2);
  for (const char* bad : {"loud", "0", "-1", "1.2x", ""})
    expect_contains(error_of([&] { select_draft_yarn_amplitude(d, bad); }), {"drafter YaRN amplitude", "legacy"});
  DraftConfig plain = load_draft_config(data_path("configs/draft-tiny.json"));
  expect_contains(error_of([&] { select_draft_yarn_amplitude(plain, "legacy"); }), {"no YaRN"});
  EXPECT_NO_THROW(select_draft_yarn_amplitude(plain, "config"));
}

// The config's rule is transformers' _compute_yarn_parameters: the mscale / mscale_all_dim ratio
// when both are given (K2.6: 1.0), else 1 + 0.1 ln(factor) (1.4159 for 64), an explicit
// attention_factor over both.
TEST(DraftConfigReal, TheConfigsAmplitudeRuleIsTransformers) {
  auto amplitude = [](const nlohmann::json& j) {
    const RopeScaling r = parse(j).rope_scaling;
    return r.attention_factor ? *r.attention_factor : yarn::attention_factor(r.factor, r.mscale, r.mscale_all_dim);
  };
  const double legacy = 1.0 + 0.1 * std::log(64.0);
  nlohmann::json j = k26_zlab();
  EXPECT_DOUBLE_EQ(amplitude(j), 1.0);
  j["rope_scaling"].erase("mscale");
  EXPECT_DOUBLE_EQ(amplitude(j), legacy);
  j = k26_zlab();
  j["rope_scaling"].erase("mscale_all_dim");
  EXPECT_DOUBLE_EQ(amplitude(j), legacy);
  j["rope_scaling"]["attention_factor"] = 1.0;
  EXPECT_DOUBLE_EQ(amplitude(j), 1.0);
}

// What is parsed travels: config.json written back (synth, plans' draft_config_json) and the
// plan's typed DraftSpec both keep the amplitude and the window.
TEST(DraftConfigReal, AmplitudeAndWindowRoundTrip) {
  nlohmann::json j = k26_modelopt();
  j["dflash_config"]["use_swa"] = true;
  j["dflash_config"]["swa_window_size"] = 4096;
  j["rope_parameters"]["attention_factor"] = 1.25;
  j["dflash_config"].erase("num_target_layers");  // 0 (not given) travels too
  DraftConfig a = parse(j);
  EXPECT_EQ(parse(draft_config_to_json(a)), a);
  flatbuffers::FlatBufferBuilder b;
  b.Finish(plan::build_draft_spec(b, a));
  EXPECT_EQ(plan::read_draft_spec(*flatbuffers::GetRoot<fb::DraftSpec>(b.GetBufferPointer())), a);
  DraftConfig z = parse(k26_zlab());
  flatbuffers::FlatBufferBuilder b2;
  b2.Finish(plan::build_draft_spec(b2, z));
  EXPECT_EQ(plan::read_draft_spec(*flatbuffers::GetRoot<fb::DraftSpec>(b2.GetBufferPointer())), z);
  // --draft-context-window is a compile option, not a config key: the spec carries it, config.json does not.
  z.context_window = 4096;
  flatbuffers::FlatBufferBuilder b3;
  b3.Finish(plan::build_draft_spec(b3, z));
  EXPECT_EQ(plan::read_draft_spec(*flatbuffers::GetRoot<fb::DraftSpec>(b3.GetBufferPointer())).context_window, 4096);
  EXPECT_FALSE(draft_config_to_json(z).dump().find("context_window") != std::string::npos);
}

}  // namespace
}  // namespace kplan
