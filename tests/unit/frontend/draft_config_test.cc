// The DFlash drafter's config.json: dflash_config or top-level fields, rope_parameters, round
// trip, refusals by name, and the checks that it fits its target.
#include <gtest/gtest.h>

#include <functional>

#include "compiler/frontend/draft_config.h"
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
      {"missing layer ids", [](auto& j) { j["dflash_config"].erase("target_layer_ids"); },
       {"field 'target_layer_ids'", "missing"}},
      {"layer ids type", [](auto& j) { j["dflash_config"]["target_layer_ids"] = {1, "3"}; },
       {"field 'dflash_config.target_layer_ids'", "element 1"}},
      {"empty layer ids", [](auto& j) { j["dflash_config"]["target_layer_ids"] = nlohmann::json::array(); },
       {"field 'dflash_config.target_layer_ids'", "empty"}},
      {"mask outside vocab", [](auto& j) { j["dflash_config"]["mask_token_id"] = 1024; },
       {"field 'dflash_config.mask_token_id'", "outside"}},
      {"missing target layers", [](auto& j) { j.erase("num_target_layers"); }, {"field 'num_target_layers'", "missing"}},
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

}  // namespace
}  // namespace kplan
