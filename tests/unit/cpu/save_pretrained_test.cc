// Checkpoints transformers itself wrote (tests/data/hf-save-pretrained: save_pretrained of a
// DeepseekV3ForCausalLM in bf16 and in float32, transformers 5's config naming) load as written
// and the CPU reference reproduces transformers' fresh float32 load of each: its logits at every
// prompt position and its greedy continuation. The bf16 directory stores the router bias in
// bf16 (widened at load); the float32 one is rounded to bf16 weights at load, so its logits are
// held to bf16's precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "runtime/ddtree/decode.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(KPLAN_TEST_DATA_DIR) / "hf-save-pretrained";

void check(const std::string& name, double tolerance) {
  const nlohmann::json goldens = nlohmann::json::parse(std::ifstream(kDir / "goldens.json"));
  const nlohmann::json& g = goldens["checkpoints"][name];
  const std::vector<int32_t> prompt = goldens["prompt"].get<std::vector<int32_t>>();
  std::unique_ptr<TargetModel> target = testing_util::reference_target(kDir / name);
  StepInput in{prompt, std::vector<int32_t>(prompt.size()), {}};
  std::iota(in.positions.begin(), in.positions.end(), 0);
  const StepOutput out = target->forward(in);
  ASSERT_EQ(out.logits.rows, static_cast<int64_t>(prompt.size())) << name;
  double worst = 0;
  for (int64_t r = 0; r < out.logits.rows; ++r) {
    const std::vector<float> want = g["logits"][r].get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(want.size()), out.logits.cols) << name;
    double diff = 0, scale = 0;
    for (size_t c = 0; c < want.size(); ++c) {
      diff = std::max(diff, std::fabs(static_cast<double>(out.logits.row(r)[c]) - want[c]));
      scale = std::max(scale, std::fabs(static_cast<double>(want[c])));
    }
    worst = std::max(worst, diff / scale);
  }
  EXPECT_LT(worst, tolerance) << name << ": max relative logit error over the prompt";
  std::printf("[ figures  ] %s: max relative logit error vs transformers %.3g\n", name.c_str(), worst);

  DecodeOptions o;
  o.max_new = static_cast<int64_t>(g["greedy_ids"].size());
  const DecodeResult r = decode(*target, nullptr, prompt, o);
  EXPECT_EQ(r.tokens, g["greedy_ids"].get<std::vector<int32_t>>()) << name;
}

TEST(SavePretrained, Bf16CheckpointMatchesTransformers) { check("hf-bf16", 1e-5); }
TEST(SavePretrained, Float32CheckpointMatchesTransformersAtBf16Precision) { check("hf-f32", 2e-2); }

}  // namespace
}  // namespace kplan
