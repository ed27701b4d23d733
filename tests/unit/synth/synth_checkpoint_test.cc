// `kplan synth` as a library: every preset writes a checkpoint the frontend reads back and that
// matches every TensorSpec; output is deterministic; INT4, sharding and the size limit work.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "compiler/frontend/int4_pack.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/synth/synth.h"
#include "compiler/synth/weight_init.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

using namespace testing_util;
namespace fs = std::filesystem;

// Every spec is present with its dtype and shape, and nothing else is in the checkpoint.
void expect_matches_specs(const SafetensorsCheckpoint& ckpt, const std::vector<TensorSpec>& specs) {
  std::set<std::string> expected;
  for (const TensorSpec& s : specs) {
    expected.insert(s.name);
    ASSERT_TRUE(ckpt.contains(s.name)) << s.name;
    const TensorView& v = ckpt.get(s.name);
    EXPECT_EQ(v.dtype, s.dtype) << s.name;
    EXPECT_EQ(v.shape, s.shape) << s.name;
  }
  for (const std::string& name : ckpt.names()) EXPECT_TRUE(expected.count(name)) << "unexpected tensor " << name;
}

std::vector<float> as_floats(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (v.dtype == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, v.bytes.data() + 2 * i, 2);
      out[i] = bf16_to_float(h);
    } else {
      std::memcpy(&out[i], v.bytes.data() + 4 * i, 4);
    }
  }
  return out;
}

PackedInt4 read_packed(const SafetensorsCheckpoint& ckpt, const std::string& module) {
  const TensorView& packed = ckpt.get(module + ".weight_packed");
  const TensorView& scale = ckpt.get(module + ".weight_scale");
  const TensorView& shape = ckpt.get(module + ".weight_shape");
  int32_t dims[2];
  std::memcpy(dims, shape.bytes.data(), 8);
  PackedInt4 p;
  p.out = dims[0];
  p.in = dims[1];
  p.group_size = 32;
  p.packed.resize(packed.bytes.size() / 4);
  std::memcpy(p.packed.data(), packed.bytes.data(), packed.bytes.size());
  p.scale.resize(scale.bytes.size() / 2);
  std::memcpy(p.scale.data(), scale.bytes.data(), scale.bytes.size());
  return p;
}

class SynthPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthPreset, TargetAndDrafterMatchTheirSpecs) {
  TempDir dir("preset");
  const ModelConfig config = preset_config(GetParam());
  const DraftConfig draft = preset_draft_config(GetParam());
  SynthResult r = synthesize_target(config, dir.path() / "target", {.seed = 1});
  EXPECT_EQ(r.files, (std::vector<std::string>{"config.json", "model.safetensors"}));
  synthesize_draft(draft, dir.path() / "draft", {.seed = 1});

  // The written config.json parses back to the same model: the same tensor list.
  const ModelConfig reread = load_model_config(dir.path() / "target" / "config.json");
  EXPECT_EQ(reread.hidden_size, config.hidden_size);
  EXPECT_EQ(reread.q_lora_rank, config.q_lora_rank);
  EXPECT_EQ(reread.rope_scaling.type, config.rope_scaling.type);
  auto ckpt = SafetensorsCheckpoint::open(dir.path() / "target");
  expect_matches_specs(ckpt, target_tensor_specs(reread));
  EXPECT_EQ(ckpt.metadata().at("format"), "pt");

  const DraftConfig draft_reread = load_draft_config(dir.path() / "draft" / "config.json");
  EXPECT_EQ(draft_reread.target_layer_ids, draft.target_layer_ids);
  EXPECT_EQ(draft_reread.mask_token_id, config.vocab_size - 1);
  check_draft_fits_target(draft_reread, reread);
  expect_matches_specs(SafetensorsCheckpoint::open(dir.path() / "draft"), draft_tensor_specs(draft_reread));
}

// The progress `kplan synth` and `kplan compile` draw: the weight bytes generated, from (0, total)
// to (total, total), and the safetensors files opened (each shard once, then all of them).
TEST(SynthProgress, ReportsTheBytesMadeAndTheFilesOpened) {
  TempDir dir("progress");
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  SynthOptions o;
  o.seed = 1;
  o.shard_bytes = 64 << 10;  // several shards
  o.on_progress = [&](uint64_t done, uint64_t total) { calls.push_back({done, total}); };
  const SynthResult r = synthesize_target(preset_config("tiny"), dir.path() / "t", o);
  ASSERT_GE(calls.size(), 3u);
  EXPECT_EQ(calls.front(), std::make_pair(uint64_t{0}, r.weight_bytes));
  EXPECT_EQ(calls.back(), std::make_pair(r.weight_bytes, r.weight_bytes));
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].first, calls[i - 1].first);

  size_t shards = 0;
  for (const std::string& f : r.files) shards += f.rfind("model-", 0) == 0 ? 1 : 0;
  ASSERT_GT(shards, 1u);
  std::vector<std::pair<uint64_t, uint64_t>> opened;
  SafetensorsCheckpoint::open(dir.path() / "t", [&](uint64_t done, uint64_t total) { opened.push_back({done, total}); });
  ASSERT_EQ(opened.size(), shards + 1);
  for (size_t i = 0; i <= shards; ++i) EXPECT_EQ(opened[i], std::make_pair(uint64_t{i}, uint64_t{shards}));
  opened.clear();
  synthesize_target(preset_config("tiny"), dir.path() / "one", {.seed = 1});
  SafetensorsCheckpoint::open(dir.path() / "one", [&](uint64_t done, uint64_t total) { opened.push_back({done, total}); });
  EXPECT_EQ(opened, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 1}, {1, 1}}));
}

TEST_P(SynthPreset, Int4ExpertsRoundTrip) {
  TempDir dir("int4");
  ModelConfig config = preset_config(GetParam());
  config.quant = k26_int4_quant_config();
  synthesize_target(config, dir.path() / "q", {.seed = 3});
  const ModelConfig reread = load_model_config(dir.path() / "q" / "config.json");
  ASSERT_TRUE(reread.quant.enabled);
  auto ckpt = SafetensorsCheckpoint::open(dir.path() / "q");
  expect_matches_specs(ckpt, target_tensor_specs(reread));

  // bf16 checkpoint of the same seed: the INT4 experts are its experts, quantised.
  synthesize_target(preset_config(GetParam()), dir.path() / "b", {.seed = 3});
  auto bf16 = SafetensorsCheckpoint::open(dir.path() / "b");

  int checked = 0;
  for (const TensorSpec& s : target_tensor_specs(reread)) {
    if (s.role != TensorRole::PackedInt4) continue;
    EXPECT_NE(s.module.find(".mlp.experts."), std::string::npos) << "only routed experts are quantised: " << s.module;
    const PackedInt4 stored = read_packed(ckpt, s.module);
    EXPECT_EQ(stored.out, s.module_shape[0]);
    EXPECT_EQ(stored.in, s.module_shape[1]);
    // Unpacking what is stored equals dequantising a fresh quantisation of the same values.
    const std::vector<float> values = synth_values(3, s.module + ".weight", s.module_shape);
    const PackedInt4 fresh = pack_int4(values, stored.out, stored.in);
    EXPECT_EQ(stored.packed, fresh.packed) << s.module;
    EXPECT_EQ(stored.scale, fresh.scale) << s.module;
    const std::vector<float> deq = unpack_int4(stored);
    const std::vector<float> ref = as_floats(bf16.get(s.module + ".weight"));
    ASSERT_EQ(deq.size(), ref.size());
    for (size_t i = 0; i < deq.size(); ++i) {
      const float scale = bf16_to_float(stored.scale[i / 32]);
      // Half a step, plus 7.5 * 2^-8 steps each for the bf16 rounding of the scale and of ref.
      ASSERT_LE(std::fabs(deq[i] - ref[i]), 0.56f * scale) << s.module << " " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3 * config.n_routed_experts * (config.num_hidden_layers - config.first_k_dense_replace));
  // Everything else is identical to the bf16 checkpoint.
  for (const std::string& name : {std::string("model.embed_tokens.weight"), std::string("lm_head.weight")})
    EXPECT_TRUE(std::equal(ckpt.get(name).bytes.begin(), ckpt.get(name).bytes.end(), bf16.get(name).bytes.begin()));
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthPreset, ::testing::Values("tiny", "tiny2", "tiny-yarn"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(SynthPresets, NumbersAreTheSharedOnes) {
  const ModelConfig t = preset_config("tiny");
  EXPECT_EQ(t.vocab_size, 1024);
  EXPECT_EQ(t.hidden_size, 256);
  EXPECT_EQ(t.num_hidden_layers, 4);
  EXPECT_EQ(*t.q_lora_rank, 128);
  EXPECT_EQ(t.n_routed_experts, 8);
  EXPECT_EQ(t.eos_token_ids, (std::vector<int64_t>{1}));
  const ModelConfig t2 = preset_config("tiny2");
  EXPECT_FALSE(t2.q_lora_rank.has_value());
  EXPECT_EQ(t2.vocab_size, 1001);
  EXPECT_EQ(t2.intermediate_size, 333);
  EXPECT_EQ(t2.n_shared_experts, 2);
  EXPECT_FALSE(t2.norm_topk_prob);
  const ModelConfig y = preset_config("tiny-yarn");
  EXPECT_EQ(y.rope_scaling.type, "yarn");
  EXPECT_EQ(y.rope_scaling.factor, 4.0);
  EXPECT_EQ(y.n_group, 4);
  EXPECT_EQ(y.topk_group, 2);
  const DraftConfig d2 = preset_draft_config("tiny2");
  EXPECT_EQ(d2.num_attention_heads, 3);
  EXPECT_EQ(d2.num_key_value_heads, 1);
  EXPECT_EQ(d2.head_dim, 40);
  EXPECT_EQ(d2.target_layer_ids, (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(preset_draft_config("tiny").target_layer_ids, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(preset_draft_config("tiny-yarn").rope_scaling.type, "yarn");
  EXPECT_NE(error_of([] { preset_config("huge"); }).find("unknown synth preset 'huge'"), std::string::npos);
}

TEST(SynthPresets, DrafterForAnyTarget) {
  const ModelConfig k26 = load_model_config(fs::path(KPLAN_TEST_DATA_DIR) / "kimi-k2.6/config.json");
  const DraftConfig d = draft_config_for(k26);
  EXPECT_EQ(d.hidden_size, 7168);
  EXPECT_EQ(d.intermediate_size, 2 * 7168);
  EXPECT_EQ(d.vocab_size, k26.vocab_size);
  EXPECT_EQ(d.mask_token_id, k26.vocab_size - 1);
  EXPECT_EQ(d.num_target_layers, 61);
  EXPECT_EQ(d.target_layer_ids, (std::vector<int64_t>{1, 20, 40, 60}));  // deep target: 4, spread
  EXPECT_EQ(d.rope_scaling.type, "yarn");
  EXPECT_EQ(d.rope_scaling.factor, k26.rope_scaling.factor);
  check_draft_fits_target(d, k26);
}

TEST(SynthDeterminism, SameSeedSameBytesDifferentSeedDifferentBytes) {
  TempDir dir("determinism");
  synthesize_target(preset_config("tiny2"), dir.path() / "a", {.seed = 11});
  synthesize_target(preset_config("tiny2"), dir.path() / "b", {.seed = 11});
  synthesize_target(preset_config("tiny2"), dir.path() / "c", {.seed = 12});
  const std::string a = read_file(dir.path() / "a" / "model.safetensors");
  EXPECT_GT(a.size(), 1000000u);
  EXPECT_EQ(a, read_file(dir.path() / "b" / "model.safetensors"));
  EXPECT_EQ(read_file(dir.path() / "a" / "config.json"), read_file(dir.path() / "b" / "config.json"));
  EXPECT_NE(a, read_file(dir.path() / "c" / "model.safetensors"));
  synthesize_draft(preset_draft_config("tiny2"), dir.path() / "da", {.seed = 11});
  synthesize_draft(preset_draft_config("tiny2"), dir.path() / "db", {.seed = 11});
  EXPECT_EQ(read_file(dir.path() / "da" / "model.safetensors"), read_file(dir.path() / "db" / "model.safetensors"));
}

TEST(SynthDeterminism, KnownValues) {
  // Pinned values: if these change, every golden made from a synthetic checkpoint is stale.
  const std::vector<float> v = synth_values(1, "model.embed_tokens.weight", {4});
  const uint16_t expected[4] = {0x3F08, 0xBFAD, 0xBEA7, 0xBFD1};  // 0.53, -1.35, -0.33, -1.63
  for (int i = 0; i < 4; ++i) EXPECT_EQ(float_to_bf16(v[i]), expected[i]) << i;
}

TEST(SynthWeights, ScalesFollowTheInitRules) {
  TempDir dir("scales");
  const ModelConfig c = preset_config("tiny");
  synthesize_target(c, dir.path(), {.seed = 1});
  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  auto stats = [&](const std::string& name) {
    const std::vector<float> v = as_floats(ckpt.get(name));
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += static_cast<double>(x) * x;
    const double mean = s / static_cast<double>(v.size());
    return std::pair{mean, std::sqrt(s2 / static_cast<double>(v.size()) - mean * mean)};
  };
  auto [em, es] = stats("model.embed_tokens.weight");
  EXPECT_NEAR(em, 0.0, 0.01);
  EXPECT_NEAR(es, 1.0, 0.01);
  auto [qm, qs] = stats("model.layers.0.self_attn.q_b_proj.weight");  // fan_in 128
  EXPECT_NEAR(qs, 1.0 / std::sqrt(128.0), 0.005);
  auto [nm, ns] = stats("model.layers.1.post_attention_layernorm.weight");
  EXPECT_NEAR(nm, 1.0, 0.03);
  EXPECT_GT(ns, 0.05);
  auto [lm, ls] = stats("lm_head.weight");
  EXPECT_NEAR(ls, 4.0 / 16.0, 0.01);
  auto [bm, bs] = stats("model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_GT(bs, 0.02);
  EXPECT_LT(bs, 0.3);
  // Tensors are independent streams: no two share values.
  EXPECT_NE(as_floats(ckpt.get("model.layers.1.mlp.experts.0.up_proj.weight")),
            as_floats(ckpt.get("model.layers.1.mlp.experts.1.up_proj.weight")));
}

TEST(SynthSharding, ShardedEqualsSingleFile) {
  TempDir dir("shards");
  SynthResult single = synthesize_target(preset_config("tiny"), dir.path() / "one", {.seed = 2});
  SynthResult sharded =
      synthesize_target(preset_config("tiny"), dir.path() / "many", {.seed = 2, .shard_bytes = 1 << 20});
  ASSERT_GT(sharded.files.size(), 4u);
  EXPECT_EQ(sharded.files.back(), "model.safetensors.index.json");
  const size_t shards = sharded.files.size() - 2;  // less config.json and the index
  char last[64];
  std::snprintf(last, sizeof last, "model-%05zu-of-%05zu.safetensors", shards, shards);
  EXPECT_EQ(sharded.files[shards], last);
  for (size_t i = 1; i <= shards; ++i) {
    EXPECT_TRUE(fs::exists(dir.path() / "many" / sharded.files[i])) << sharded.files[i];
    EXPECT_LE(fs::file_size(dir.path() / "many" / sharded.files[i]), (1u << 20) + 16384u);
  }
  EXPECT_FALSE(fs::exists(dir.path() / "many" / "model.safetensors"));
  auto a = SafetensorsCheckpoint::open(dir.path() / "one");
  auto b = SafetensorsCheckpoint::open(dir.path() / "many");
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names())
    EXPECT_TRUE(std::equal(a.get(name).bytes.begin(), a.get(name).bytes.end(), b.get(name).bytes.begin(),
                           b.get(name).bytes.end()))
        << name;
  // Writing a single file over the sharded directory removes the old shards and index.
  synthesize_target(preset_config("tiny"), dir.path() / "many", {.seed = 2});
  EXPECT_FALSE(fs::exists(dir.path() / "many" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "many" / sharded.files[1]));
  EXPECT_EQ(read_file(dir.path() / "one" / "model.safetensors"), read_file(dir.path() / "many" / "model.safetensors"));
}

TEST(SynthLimits, RealSizeConfigIsRefused) {
  TempDir dir("limit");
  const ModelConfig k26 = load_model_config(fs::path(KPLAN_TEST_DATA_DIR) / "kimi-k2.6/config.json");
  const std::string msg = error_of([&] { synthesize_target(k26, dir.path(), {}); });
  EXPECT_NE(msg.find("over the limit of 2048 MiB"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir.path() / "config.json")) << "nothing is written when refused";
}

}  // namespace
}  // namespace kplan
