// Cross-checks against facts recorded from HuggingFace transformers when the goldens were made
// (tests/data/goldens/<case>.json "hf_facts"): the presets' config.json, as written by
// model_config_to_json and parsed back, gives transformers' softmax scale and norm epsilons.
#include <gtest/gtest.h>

#include "compiler/frontend/model_config.h"
#include "compiler/synth/presets.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

TEST(HfFacts, ParsedPresetConfigsMatchTransformers) {
  for (const char* golden : {"tiny", "tiny2", "tiny-yarn", "tiny-int4"}) {
    SCOPED_TRACE(golden);
    nlohmann::json g = load_json(std::string("goldens/") + golden + ".json");
    ASSERT_TRUE(g.contains("hf_facts"));
    const auto& facts = g["hf_facts"];
    ModelConfig preset = preset_config(g["synth_args"][0].get<std::string>());
    ModelConfig c = parse_model_config(model_config_to_json(preset), golden);
    EXPECT_NEAR(c.softmax_scale(), facts["softmax_scale"].get<double>(), 1e-12);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, facts["rms_norm_eps"].get<double>());
    EXPECT_DOUBLE_EQ(c.rope_theta, facts["rope_parameters"]["rope_theta"].get<double>());
    const std::string rope_type = facts["rope_parameters"]["rope_type"].get<std::string>();
    EXPECT_EQ(c.rope_scaling.type, rope_type == "default" ? "none" : rope_type);
    if (rope_type == "yarn") {
      EXPECT_DOUBLE_EQ(c.rope_scaling.factor, facts["rope_parameters"]["factor"].get<double>());
      EXPECT_EQ(c.rope_scaling.original_max_position_embeddings,
                facts["rope_parameters"]["original_max_position_embeddings"].get<int64_t>());
    }
    EXPECT_EQ(facts["rope_interleave"], true);
  }
}

}  // namespace
}  // namespace kplan
