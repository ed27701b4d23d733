// Opening checkpoints: config + safetensors validated against the tensor list (present,
// dtype, shape, INT4 weight_shape contents), sharded sets, structure-only (--no-weights) opens
// of the real K2.6 config, and drafter checkpoints.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "compiler/frontend/checkpoint.h"
#include "compiler/frontend/weights_fp32.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

// Zero-filled tensors for every spec; INT4 weight_shape holds the module's [out, in].
std::vector<TensorData> tensors_for(const std::vector<TensorSpec>& specs) {
  std::vector<TensorData> out;
  for (const auto& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    TensorData t{s.name, s.dtype, s.shape, std::vector<uint8_t>(static_cast<size_t>(n) * dtype_size(s.dtype), 0)};
    if (s.role == TensorRole::PackedShape) {
      int32_t v[2] = {static_cast<int32_t>(s.module_shape[0]), static_cast<int32_t>(s.module_shape[1])};
      std::memcpy(t.bytes.data(), v, 8);
    }
    out.push_back(std::move(t));
  }
  return out;
}

void write_json(const std::filesystem::path& file, const nlohmann::json& j) {
  std::ofstream(file) << j.dump(2);
}

// Writes config.json (from `config`) and model.safetensors (from its specs, changed by `edit`).
void write_target(const std::filesystem::path& dir, const ModelConfig& config,
                  const std::function<void(std::vector<TensorData>&)>& edit = {}) {
  write_json(dir / "config.json", model_config_to_json(config));
  auto tensors = tensors_for(target_tensor_specs(config));
  if (edit) edit(tensors);
  write_safetensors(dir / "model.safetensors", tensors);
}

TensorData& find(std::vector<TensorData>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("test bug: no tensor " + name);
}

void remove_tensor(std::vector<TensorData>& ts, const std::string& name) {
  std::erase_if(ts, [&](const TensorData& t) { return t.name == name; });
}

ModelConfig tiny() { return load_model_config(data_path("configs/tiny.json")); }

ModelConfig tiny_int4() {
  ModelConfig c = tiny();
  c.quant = parse_model_config(load_json("kimi-k2.6/config.json"), "k2.6").quant;
  return c;
}

TEST(Checkpoint, OpensAValidTinyCheckpoint) {
  TempDir dir("valid");
  write_target(dir.path(), tiny());
  TargetCheckpoint ck = TargetCheckpoint::open(dir.path());
  EXPECT_TRUE(ck.has_weights());
  EXPECT_EQ(ck.config().num_hidden_layers, 4);
  EXPECT_EQ(ck.specs().size(), 129u);
  EXPECT_TRUE(ck.weights().contains("model.layers.3.mlp.experts.7.down_proj.weight"));
  // Given the config.json itself, the directory around it is used.
  EXPECT_TRUE(TargetCheckpoint::open(dir.path() / "config.json").has_weights());
}

TEST(Checkpoint, OpensAShardedInt4Checkpoint) {
  TempDir dir("int4");
  ModelConfig c = tiny_int4();
  write_json(dir.path() / "config.json", model_config_to_json(c));
  write_sharded_safetensors(dir.path(), tensors_for(target_tensor_specs(c)), 1 << 20);
  TargetCheckpoint ck = TargetCheckpoint::open(dir.path());
  EXPECT_TRUE(ck.config().quant.enabled);
  const auto& w = ck.weights();
  EXPECT_TRUE(w.contains("model.layers.1.mlp.experts.0.gate_proj.weight_packed"));
  EXPECT_TRUE(w.contains("model.layers.1.mlp.shared_experts.gate_proj.weight"));
  EXPECT_TRUE(w.contains("model.layers.0.mlp.gate_proj.weight"));
  Fp32Tensor e = linear_weight_fp32(w, "model.layers.1.mlp.experts.0.down_proj");
  EXPECT_EQ(e.shape, (std::vector<int64_t>{256, 128}));
  Fp32Tensor s = linear_weight_fp32(w, "model.layers.1.mlp.shared_experts.down_proj");
  EXPECT_EQ(s.shape, (std::vector<int64_t>{256, 128}));
}

TEST(Checkpoint, NamesAMissingTensor) {
  TempDir dir("missing");
  write_target(dir.path(), tiny(), [](auto& ts) { remove_tensor(ts, "model.layers.2.self_attn.kv_b_proj.weight"); });
  std::string msg = error_of([&] { TargetCheckpoint::open(dir.path()); });
  expect_contains(msg, {dir.path().string(), "1 tensor problem", "(1 missing)", "missing model.layers.2.self_attn.kv_b_proj.weight"});
}

TEST(Checkpoint, NamesAWrongDtype) {
  TempDir dir("dtype");
  write_target(dir.path(), tiny(), [](auto& ts) {
    TensorData& t = find(ts, "model.layers.0.input_layernorm.weight");
    t.dtype = DType::I32;
    t.bytes.resize(t.bytes.size() * 2);
  });
  expect_contains(error_of([&] { TargetCheckpoint::open(dir.path()); }),
                  {"model.layers.0.input_layernorm.weight has dtype I32, expected BF16"});
  // The router bias takes any float, not an integer.
  TempDir ints("dtype-int");
  write_target(ints.path(), tiny(), [](auto& ts) { find(ts, "model.layers.1.mlp.gate.e_score_correction_bias").dtype = DType::I32; });
  expect_contains(error_of([&] { TargetCheckpoint::open(ints.path()); }),
                  {"model.layers.1.mlp.gate.e_score_correction_bias has dtype I32, expected F32"});
}

// transformers' save_pretrained in bf16 stores every tensor in bf16, the router's score-correction
// bias included (f16 likewise): it is widened to f32 at load, values exact.
TEST(Checkpoint, ARouterBiasStoredInBf16OrF16IsWidenedToF32) {
  const std::string bias = "model.layers.1.mlp.gate.e_score_correction_bias";
  for (DType stored : {DType::BF16, DType::F16}) {
    TempDir dir("widen");
    std::vector<float> want;
    write_target(dir.path(), tiny(), [&](auto& ts) {
      TensorData& t = find(ts, bias);
      const size_t n = t.bytes.size() / 4;
      t.dtype = stored;
      t.bytes.assign(n * 2, 0);
      for (size_t i = 0; i < n; ++i) {
        const float v = 0.25f * static_cast<float>(i) - 1.5f;  // exact in both
        const uint16_t h = stored == DType::BF16 ? float_to_bf16(v) : float_to_f16(v);
        std::memcpy(t.bytes.data() + 2 * i, &h, 2);
        want.push_back(v);
      }
    });
    TargetCheckpoint c = TargetCheckpoint::open(dir.path());
    const TensorView& t = c.weights().get(bias);
    ASSERT_EQ(t.dtype, DType::F32) << dtype_safetensors_name(stored);
    ASSERT_EQ(t.bytes.size(), want.size() * 4);
    std::vector<float> got(want.size());
    std::memcpy(got.data(), t.bytes.data(), t.bytes.size());
    EXPECT_EQ(got, want) << dtype_safetensors_name(stored);
  }
}

TEST(Checkpoint, NamesAWrongShape) {
  TempDir dir("shape");
  write_target(dir.path(), tiny(), [](auto& ts) { find(ts, "model.layers.0.mlp.down_proj.weight").shape = {512, 256}; });
  expect_contains(error_of([&] { TargetCheckpoint::open(dir.path()); }),
                  {"model.layers.0.mlp.down_proj.weight has shape [512, 256], expected [256, 512]"});
}

TEST(Checkpoint, NamesAWrongInt4WeightShape) {
  TempDir dir("int4shape");
  write_target(dir.path(), tiny_int4(), [](auto& ts) {
    int32_t v[2] = {128, 264};
    std::memcpy(find(ts, "model.layers.2.mlp.experts.5.up_proj.weight_shape").bytes.data(), v, 8);
  });
  expect_contains(error_of([&] { TargetCheckpoint::open(dir.path()); }),
                  {"model.layers.2.mlp.experts.5.up_proj.weight_shape holds [128, 264], expected [128, 256]"});
}

TEST(Checkpoint, BF16ExpertsWhereConfigSaysInt4AreRefused) {
  TempDir dir("notint4");
  // Weights written for the bf16 config, config.json saying INT4: every expert part is missing.
  write_json(dir.path() / "config.json", model_config_to_json(tiny_int4()));
  write_safetensors(dir.path() / "model.safetensors", tensors_for(target_tensor_specs(tiny())));
  std::string msg = error_of([&] { TargetCheckpoint::open(dir.path()); });
  // 3 MoE layers x 8 experts x 3 Linear x 3 parts.
  expect_contains(msg, {"216 tensor problems", "(216 missing)", "missing model.layers.1.mlp.experts.0.gate_proj.weight_packed",
                        "and 211 more"});
}

TEST(Checkpoint, NoWeightsModeReadsOnlyTheConfig) {
  TargetCheckpoint k = TargetCheckpoint::open(data_path("kimi-k2.6"), WeightsMode::None);
  EXPECT_FALSE(k.has_weights());
  EXPECT_EQ(k.config().tensor_prefix, "language_model.");
  EXPECT_EQ(k.specs().size(), 208215u);
  expect_contains(error_of([&] { k.weights(); }), {"--no-weights"});
  // With weights asked for, the absent safetensors are named.
  expect_contains(error_of([&] { TargetCheckpoint::open(data_path("kimi-k2.6")); }), {"kimi-k2.6", "safetensors"});
}

TEST(Checkpoint, MissingConfigOrDirectoryIsNamed) {
  TempDir dir("noconfig");
  expect_contains(error_of([&] { TargetCheckpoint::open(dir.path()); }), {dir.path().string(), "no config.json"});
  expect_contains(error_of([&] { TargetCheckpoint::open(dir.path() / "nowhere"); }), {"nowhere", "no such file"});
}

TEST(Checkpoint, BadConfigInsideACheckpointNamesTheFile) {
  TempDir dir("badconfig");
  nlohmann::json j = model_config_to_json(tiny());
  j["topk_method"] = "group_limited_greedy";
  write_json(dir.path() / "config.json", j);
  expect_contains(error_of([&] { TargetCheckpoint::open(dir.path(), WeightsMode::None); }),
                  {(dir.path() / "config.json").string(), "field 'topk_method'"});
}

TEST(DraftCheckpointTest, OpensAndValidatesADrafter) {
  TempDir dir("draft");
  DraftConfig d = load_draft_config(data_path("configs/draft-tiny.json"));
  write_json(dir.path() / "config.json", draft_config_to_json(d));
  auto tensors = tensors_for(draft_tensor_specs(d));
  write_safetensors(dir.path() / "model.safetensors", tensors);
  DraftCheckpoint ck = DraftCheckpoint::open(dir.path());
  EXPECT_EQ(ck.config().target_layer_ids, (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(ck.weights().contains("fc.weight"));
  EXPECT_NO_THROW(check_draft_fits_target(ck.config(), tiny()));

  find(tensors, "layers.1.self_attn.k_norm.weight").shape = {32};
  find(tensors, "layers.1.self_attn.k_norm.weight").bytes.resize(64);
  write_safetensors(dir.path() / "model.safetensors", tensors);
  expect_contains(error_of([&] { DraftCheckpoint::open(dir.path()); }),
                  {"drafter checkpoint", "layers.1.self_attn.k_norm.weight has shape [32], expected [64]"});
  EXPECT_FALSE(DraftCheckpoint::open(dir.path(), WeightsMode::None).has_weights());
}

// A drafter checkpoint holds exactly its config's tensors: a DFlash2 checkpoint labelled as
// DFlash (its convolutions and candidate selector) or one with its own embedding / lm_head would
// otherwise load, run without those tensors and propose junk. Refused by name, before the
// per-tensor checks; structure-only opens read no tensors.
TEST(DraftCheckpointTest, UnexpectedTensorsAreRefusedByName) {
  TempDir dir("draft-extra");
  DraftConfig d = load_draft_config(data_path("configs/draft-tiny.json"));
  write_json(dir.path() / "config.json", draft_config_to_json(d));
  const auto plain = tensors_for(draft_tensor_specs(d));
  auto with = [&](std::vector<std::pair<std::string, std::vector<int64_t>>> extra) {
    auto ts = plain;
    for (auto& [name, shape] : extra) {
      int64_t n = 1;
      for (int64_t x : shape) n *= x;
      ts.push_back({name, DType::BF16, shape, std::vector<uint8_t>(static_cast<size_t>(n) * 2, 0)});
    }
    write_safetensors(dir.path() / "model.safetensors", ts);
  };

  with({{"layers.0.attention_conv.base_kernel", {2, 4, 256}},
        {"layers.0.attention_conv.kernel_projection.weight", {32, 256}},
        {"layers.0.mlp_conv.base_kernel", {2, 4, 256}},
        {"layers.1.attention_conv.base_kernel", {2, 4, 256}},
        {"layers.1.mlp_conv.base_kernel", {2, 4, 256}},
        {"candidate_selector.predecessor_codebook.weight", {1024, 8}},
        {"candidate_selector.successor_codebook.weight", {1024, 8}}});
  std::string msg = error_of([&] { DraftCheckpoint::open(dir.path()); });
  expect_contains(msg, {"drafter checkpoint", "7 tensors a plain DFlash drafter does not have", "DFlash2",
                        "candidate_selector.predecessor_codebook.weight", "layers.0.attention_conv.base_kernel",
                        "and 2 more"});
  EXPECT_NO_THROW(DraftCheckpoint::open(dir.path(), WeightsMode::None));

  with({{"embed_tokens.weight", {1024, 256}}});
  expect_contains(error_of([&] { DraftCheckpoint::open(dir.path()); }),
                  {"1 tensor a plain DFlash drafter does not have", "an embedding or lm_head of its own",
                   "embed_tokens.weight"});
  with({{"lm_head.weight", {1024, 256}}});
  expect_contains(error_of([&] { DraftCheckpoint::open(dir.path()); }), {"lm_head of its own", "lm_head.weight"});
  with({{"layers.0.self_attn.q_proj.weight_scale", {1}}});
  expect_contains(error_of([&] { DraftCheckpoint::open(dir.path()); }),
                  {"quantized", "layers.0.self_attn.q_proj.weight_scale"});

  with({});
  EXPECT_NO_THROW(DraftCheckpoint::open(dir.path()));
}

TEST(TensorSpecs, AGiantExpertCountIsRefusedByFieldBeforeTheListIsBuilt) {
  ModelConfig c = tiny();
  c.n_routed_experts = 100000000;  // 10^8: the name list alone took 8 GB before it was refused
  testing_util::expect_contains(testing_util::error_of([&] { target_tensor_specs(c); }),
                                {"n_routed_experts 100000000", "3 MoE layers", "expert tensors"});
  c.n_routed_experts = 384;  // K2.6's count is fine
  EXPECT_GT(target_tensor_specs(c).size(), 3u * 384u * 3u);
}

}  // namespace
}  // namespace kplan
