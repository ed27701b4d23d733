#pragma once
// A small hand-made plan that exercises every table of the format (tests only): two kernels, a
// few weights of awkward sizes, an arena with every slot role, step inputs, a KV cache and two
// buckets. Cubins are placeholder bytes unless a test supplies real ones.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schemas/plan_model.h"
#include "compiler/synth/presets.h"

namespace kplan::plan::testing {

// A per-process scratch directory, removed when the test binary exits.
inline std::filesystem::path scratch_dir(const std::string& prefix) {
  struct Dir {
    std::filesystem::path path;
    explicit Dir(std::filesystem::path p) : path(std::move(p)) { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir(std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid())));
  return dir.path;
}

inline std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

inline Plan sample_plan(std::vector<std::string> archs = {"sm_90", "sm_120"}) {
  Plan p;
  p.header.compiler_version = "0.1.0-test";
  p.header.cuda_version = "13.0";
  p.header.nvrtc_version = "13.0";
  p.header.archs = archs;
  p.header.limits = {4, 4, 64};
  p.model = preset_config("tiny");
  p.model_config_json = model_config_to_json(p.model).dump(2);
  p.tokenizer = {'{', '}'};
  p.ir_text = "func @target(%tokens: i32[T]) {\n  %0 = embedding(%tokens)\n}\n";

  Kernel embed;
  embed.id = "embedding_v16_h8_bf16";
  embed.entry = "kplan_embedding";
  embed.family = "embedding";
  embed.cache_key = "0123456789abcdef";
  embed.constants = {{"vocab", 16}, {"hidden", 8}};
  embed.params = {ParamType::Pointer, ParamType::Pointer, ParamType::Pointer, ParamType::I32, ParamType::F32};
  embed.param_names = {"out", "table", "tokens", "n", "scale"};
  for (size_t i = 0; i < archs.size(); ++i) embed.binaries.push_back({archs[i], pattern_bytes(300 + i, 7 + i)});
  Kernel head = embed;
  head.id = "lm_head_v16_h8";
  head.entry = "kplan_lm_head";
  head.family = "lm_head";
  head.constants = {};
  head.params = {ParamType::Pointer, ParamType::Pointer, ParamType::Pointer, ParamType::I64};
  head.param_names = {"logits", "x", "w", "rows"};
  p.kernels = {embed, head};

  Weight w0;
  w0.name = "model.embed_tokens.weight";
  w0.dtype = DType::BF16;
  w0.shape = {16, 8};
  w0.owned = pattern_bytes(16 * 8 * 2, 1);
  Weight w1;
  w1.name = "lm_head.weight";
  w1.shape = {16, 8};
  w1.owned = pattern_bytes(16 * 8 * 2 + 3, 2);  // odd size: the next weight must still be aligned
  Weight w2;
  w2.name = "model.layers.0.mlp.experts.0.gate_proj.weight_packed";
  w2.dtype = DType::I32;
  w2.shape = {4, 1100};
  w2.layout = "int4_pack8_k";
  w2.owned = pattern_bytes(4 * 1100 * 4, 3);  // larger than a page
  p.weights = {w0, w1, w2};

  p.buffers.slots = {
      {"tokens", SlotRole::Input, 0, 16, 256},      {"positions", SlotRole::Input, 0, 16, 256},
      {"tree_mask", SlotRole::Input, 0, 16, 256},   {"cache_length", SlotRole::Input, 0, 4, 256},
      {"token_count", SlotRole::Input, 0, 4, 256},  {"hidden", SlotRole::Scratch, 0, 4 * 8 * 4, 256},
      {"kv.layer0", SlotRole::Persistent, 0, 64 * 32, 256}, {"logits", SlotRole::Output, 0, 4 * 16 * 4, 256},
  };
  assign_arena_offsets(p.buffers);
  p.step_inputs = {{StepInputKind::Tokens, 0}, {StepInputKind::Positions, 1}, {StepInputKind::TreeMask, 2},
                   {StepInputKind::CacheLength, 3}, {StepInputKind::TokenCount, 4}};
  p.kv_caches = {{"layer0.latent", 6, 32, 64}};

  for (uint32_t t : {1u, 4u}) {
    Bucket b;
    b.tokens = t;
    Launch e;
    e.kernel = 0;
    e.grid = {t, 1, 1};
    e.block = {32, 1, 1};
    e.args = {LaunchArg::buffer(5), LaunchArg::weight(0), LaunchArg::step_input(StepInputKind::Tokens),
              LaunchArg::i32(static_cast<int32_t>(t)), LaunchArg::f32(0.5f)};
    e.note = "%0 = embedding(%tokens)";
    Launch h;
    h.kernel = 1;
    h.grid = {t, 2, 1};
    h.block = {128, 1, 1};
    h.smem_bytes = 1024;
    h.args = {LaunchArg::buffer(7), LaunchArg::buffer(5, 32), LaunchArg::weight(1), LaunchArg::i64(-3)};
    b.launches = {e, h};
    b.outputs = {{OutputKind::Logits, -1, 7, 0, DType::F32, t, 16}};
    p.buckets.push_back(b);
  }
  return p;
}

}  // namespace kplan::plan::testing
