// The tensor list a checkpoint must hold: names, dtypes, shapes and order, for the presets,
// the real K2.6 config (INT4 routed experts behind the "language_model." prefix) and drafters.
#include <gtest/gtest.h>

#include <map>

#include "compiler/frontend/tensor_spec.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& specs) {
  std::map<std::string, TensorSpec> m;
  for (const auto& s : specs) EXPECT_TRUE(m.emplace(s.name, s).second) << "duplicate " << s.name;
  return m;
}

void expect_spec(const std::map<std::string, TensorSpec>& m, const std::string& name, DType dtype,
                 std::vector<int64_t> shape) {
  auto it = m.find(name);
  ASSERT_NE(it, m.end()) << "no spec " << name;
  EXPECT_EQ(it->second.dtype, dtype) << name;
  EXPECT_EQ(it->second.shape, shape) << name;
}

TEST(TensorSpec, TinyNamesShapesAndOrder) {
  ModelConfig c = load_model_config(data_path("configs/tiny.json"));
  auto specs = target_tensor_specs(c);
  // embed + dense layer (9 attention/norm + 3 mlp) + 3 MoE layers (9 + router 2 + 8*3 experts
  // + 3 shared) + norm + lm_head.
  EXPECT_EQ(specs.size(), 1u + 12u + 3u * 38u + 2u);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  auto m = by_name(specs);
  expect_spec(m, "model.embed_tokens.weight", DType::BF16, {1024, 256});
  expect_spec(m, "model.layers.0.input_layernorm.weight", DType::BF16, {256});
  expect_spec(m, "model.layers.0.self_attn.q_a_proj.weight", DType::BF16, {128, 256});
  expect_spec(m, "model.layers.0.self_attn.q_a_layernorm.weight", DType::BF16, {128});
  expect_spec(m, "model.layers.0.self_attn.q_b_proj.weight", DType::BF16, {4 * 48, 128});
  expect_spec(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", DType::BF16, {64 + 16, 256});
  expect_spec(m, "model.layers.0.self_attn.kv_a_layernorm.weight", DType::BF16, {64});
  expect_spec(m, "model.layers.0.self_attn.kv_b_proj.weight", DType::BF16, {4 * (32 + 32), 64});
  expect_spec(m, "model.layers.0.self_attn.o_proj.weight", DType::BF16, {256, 4 * 32});
  expect_spec(m, "model.layers.0.post_attention_layernorm.weight", DType::BF16, {256});
  expect_spec(m, "model.layers.0.mlp.gate_proj.weight", DType::BF16, {512, 256});
  expect_spec(m, "model.layers.0.mlp.up_proj.weight", DType::BF16, {512, 256});
  expect_spec(m, "model.layers.0.mlp.down_proj.weight", DType::BF16, {256, 512});
  EXPECT_EQ(m.count("model.layers.0.mlp.gate.weight"), 0u);
  expect_spec(m, "model.layers.1.mlp.gate.weight", DType::BF16, {8, 256});
  expect_spec(m, "model.layers.1.mlp.gate.e_score_correction_bias", DType::F32, {8});
  expect_spec(m, "model.layers.3.mlp.experts.7.gate_proj.weight", DType::BF16, {128, 256});
  expect_spec(m, "model.layers.3.mlp.experts.7.down_proj.weight", DType::BF16, {256, 128});
  expect_spec(m, "model.layers.1.mlp.shared_experts.up_proj.weight", DType::BF16, {128, 256});
  expect_spec(m, "model.norm.weight", DType::BF16, {256});
  expect_spec(m, "lm_head.weight", DType::BF16, {1024, 256});
  EXPECT_EQ(m.count("model.layers.1.mlp.gate_proj.weight"), 0u);
  EXPECT_EQ(m.at("model.layers.1.self_attn.o_proj.weight").module, "model.layers.1.self_attn.o_proj");
  for (const auto& s : specs) EXPECT_EQ(s.role, TensorRole::Plain) << s.name;
}

TEST(TensorSpec, Tiny2UsesQProjAndWiderSharedExperts) {
  ModelConfig c = load_model_config(data_path("configs/tiny2.json"));
  auto m = by_name(target_tensor_specs(c));
  expect_spec(m, "model.layers.0.self_attn.q_proj.weight", DType::BF16, {6 * 32, 192});
  EXPECT_EQ(m.count("model.layers.0.self_attn.q_a_proj.weight"), 0u);
  EXPECT_EQ(m.count("model.layers.0.self_attn.q_a_layernorm.weight"), 0u);
  expect_spec(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", DType::BF16, {48 + 8, 192});
  expect_spec(m, "model.layers.0.self_attn.kv_b_proj.weight", DType::BF16, {6 * (24 + 20), 48});
  expect_spec(m, "model.layers.5.self_attn.o_proj.weight", DType::BF16, {192, 6 * 20});
  expect_spec(m, "model.layers.1.mlp.down_proj.weight", DType::BF16, {192, 333});
  expect_spec(m, "model.layers.2.mlp.gate.weight", DType::BF16, {6, 192});
  expect_spec(m, "model.layers.2.mlp.shared_experts.gate_proj.weight", DType::BF16, {96 * 2, 192});
  expect_spec(m, "model.layers.2.mlp.experts.5.up_proj.weight", DType::BF16, {96, 192});
  EXPECT_EQ(m.count("model.layers.2.mlp.experts.6.up_proj.weight"), 0u);
}

TEST(TensorSpec, TiedEmbeddingsHaveNoLmHead) {
  ModelConfig c = load_model_config(data_path("configs/tiny.json"));
  c.tie_word_embeddings = true;
  auto m = by_name(target_tensor_specs(c));
  EXPECT_EQ(m.count("lm_head.weight"), 0u);
}

TEST(TensorSpec, KimiK26HasPrefixAndInt4Experts) {
  ModelConfig c = load_model_config(data_path("kimi-k2.6/config.json"));
  auto specs = target_tensor_specs(c);
  // 61 layers: 1 dense (12 tensors), 60 MoE (9 + 2 router + 384 experts x 3 Linear x 3 INT4
  // parts + 3 shared), plus embed, norm, lm_head.
  EXPECT_EQ(specs.size(), 3u + 12u + 60u * (9u + 2u + 384u * 9u + 3u));
  auto m = by_name(specs);
  const std::string p = "language_model.model.layers.";
  expect_spec(m, "language_model.model.embed_tokens.weight", DType::BF16, {163840, 7168});
  expect_spec(m, "language_model.lm_head.weight", DType::BF16, {163840, 7168});
  expect_spec(m, "language_model.model.norm.weight", DType::BF16, {7168});
  expect_spec(m, p + "0.mlp.gate_proj.weight", DType::BF16, {18432, 7168});
  expect_spec(m, p + "0.mlp.down_proj.weight", DType::BF16, {7168, 18432});
  expect_spec(m, p + "7.self_attn.q_a_proj.weight", DType::BF16, {1536, 7168});
  expect_spec(m, p + "7.self_attn.q_b_proj.weight", DType::BF16, {64 * 192, 1536});
  expect_spec(m, p + "7.self_attn.kv_a_proj_with_mqa.weight", DType::BF16, {576, 7168});
  expect_spec(m, p + "7.self_attn.kv_b_proj.weight", DType::BF16, {64 * 256, 512});
  expect_spec(m, p + "7.self_attn.o_proj.weight", DType::BF16, {7168, 64 * 128});
  expect_spec(m, p + "60.mlp.gate.weight", DType::BF16, {384, 7168});
  expect_spec(m, p + "60.mlp.gate.e_score_correction_bias", DType::F32, {384});
  expect_spec(m, p + "1.mlp.shared_experts.gate_proj.weight", DType::BF16, {2048, 7168});
  expect_spec(m, p + "1.mlp.shared_experts.down_proj.weight", DType::BF16, {7168, 2048});
  expect_spec(m, p + "1.mlp.experts.0.gate_proj.weight_packed", DType::I32, {2048, 7168 / 8});
  expect_spec(m, p + "1.mlp.experts.0.gate_proj.weight_scale", DType::BF16, {2048, 7168 / 32});
  expect_spec(m, p + "1.mlp.experts.0.gate_proj.weight_shape", DType::I32, {2});
  expect_spec(m, p + "60.mlp.experts.383.down_proj.weight_packed", DType::I32, {7168, 2048 / 8});
  expect_spec(m, p + "60.mlp.experts.383.down_proj.weight_scale", DType::BF16, {7168, 2048 / 32});
  EXPECT_EQ(m.count(p + "1.mlp.experts.0.gate_proj.weight"), 0u);
  const TensorSpec& packed = m.at(p + "60.mlp.experts.383.down_proj.weight_packed");
  EXPECT_EQ(packed.role, TensorRole::PackedInt4);
  EXPECT_EQ(packed.module, p + "60.mlp.experts.383.down_proj");
  EXPECT_EQ(packed.module_shape, (std::vector<int64_t>{7168, 2048}));
  EXPECT_EQ(m.at(p + "60.mlp.experts.383.down_proj.weight_scale").role, TensorRole::PackedScale);
  EXPECT_EQ(m.at(p + "60.mlp.experts.383.down_proj.weight_shape").role, TensorRole::PackedShape);

  // Parameter count of the text model: about 1.03 T, routed experts included.
  double params = 0;
  for (const auto& s : specs) {
    if (s.role == TensorRole::PackedInt4)
      params += static_cast<double>(s.module_shape[0]) * static_cast<double>(s.module_shape[1]);
    else if (s.role == TensorRole::Plain) {
      double n = 1;
      for (int64_t d : s.shape) n *= static_cast<double>(d);
      params += n;
    }
  }
  EXPECT_GT(params, 1.02e12);
  EXPECT_LT(params, 1.04e12);
}

TEST(TensorSpec, DraftTiny) {
  DraftConfig d = load_draft_config(data_path("configs/draft-tiny.json"));
  auto specs = draft_tensor_specs(d);
  EXPECT_EQ(specs.size(), 2u + 2u * 11u + 1u);
  EXPECT_EQ(specs.front().name, "fc.weight");
  EXPECT_EQ(specs.back().name, "norm.weight");
  auto m = by_name(specs);
  expect_spec(m, "fc.weight", DType::BF16, {256, 2 * 256});
  expect_spec(m, "hidden_norm.weight", DType::BF16, {256});
  expect_spec(m, "layers.1.input_layernorm.weight", DType::BF16, {256});
  expect_spec(m, "layers.1.self_attn.q_proj.weight", DType::BF16, {4 * 64, 256});
  expect_spec(m, "layers.1.self_attn.k_proj.weight", DType::BF16, {2 * 64, 256});
  expect_spec(m, "layers.1.self_attn.v_proj.weight", DType::BF16, {2 * 64, 256});
  expect_spec(m, "layers.1.self_attn.o_proj.weight", DType::BF16, {256, 4 * 64});
  expect_spec(m, "layers.1.self_attn.q_norm.weight", DType::BF16, {64});
  expect_spec(m, "layers.1.self_attn.k_norm.weight", DType::BF16, {64});
  expect_spec(m, "layers.1.post_attention_layernorm.weight", DType::BF16, {256});
  expect_spec(m, "layers.1.mlp.gate_proj.weight", DType::BF16, {512, 256});
  expect_spec(m, "layers.1.mlp.down_proj.weight", DType::BF16, {256, 512});
  EXPECT_EQ(m.count("layers.2.input_layernorm.weight"), 0u);
}

// Issue 12 (tests/fuzz/corpus/model_config/crashes/issue12-heads-2pow62): the config's numbers are
// untrusted, and 2^62 heads times a head dim wrapped int64 (undefined behaviour; UBSan) into a
// shape that looked like any other. Each product is checked and refused naming the fields.
std::string spec_error(const nlohmann::json& j) {
  try {
    target_tensor_specs(parse_model_config(j, "config.json"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(TensorSpec, HeadCountsWhoseProductsOverflowAreRefusedByField) {
  nlohmann::json j = load_json("configs/tiny.json");
  j["num_attention_heads"] = j["num_key_value_heads"] = int64_t{1} << 62;
  EXPECT_NE(spec_error(j).find("num_attention_heads x qk_head_dim = 4611686018427387904 x 48 overflows"), std::string::npos)
      << spec_error(j);
  j = load_json("configs/tiny.json");
  j["qk_nope_head_dim"] = INT64_MAX;
  EXPECT_NE(spec_error(j).find("qk_head_dim (qk_nope_head_dim + qk_rope_head_dim)"), std::string::npos) << spec_error(j);
}

TEST(TensorSpec, ATensorPast2To63BytesIsRefusedByName) {
  nlohmann::json j = load_json("configs/tiny.json");
  j["vocab_size"] = int64_t{1} << 40;
  j["hidden_size"] = int64_t{1} << 22;  // 2^62 elements of bf16: 2^63 bytes
  EXPECT_NE(spec_error(j).find("tensor model.embed_tokens.weight of shape [1099511627776, 4194304] would hold more "
                               "than 2^63 bytes"),
            std::string::npos)
      << spec_error(j);
}

TEST(TensorSpec, DrafterHeadProductsOverflowAreRefusedByField) {
  nlohmann::json j = load_json("configs/draft-tiny.json");
  j["num_attention_heads"] = int64_t{1} << 60;
  j["num_key_value_heads"] = int64_t{1} << 60;
  std::string what = "no error";
  try {
    draft_tensor_specs(parse_draft_config(j, "config.json"));
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("num_attention_heads x head_dim"), std::string::npos) << what;
}

}  // namespace
}  // namespace kplan
