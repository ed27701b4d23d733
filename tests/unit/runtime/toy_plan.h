#pragma once
// A toy plan with real NVRTC-compiled kernels whose results the host can recompute exactly, to
// test the GPU runtime's mechanics (arena, weights, step inputs, graphs, KV commit) apart from
// the model kernels. Step of T tokens (bucket B >= T), committed cache length S:
//   kv[S + i]        = tokens[i]                             (a KV cache of 4-byte rows)
//   logits[i][v]     = w[v] * scale + tokens[i] + 10 * positions[i]
//                      + sum_{r<S} kv[r] * (r + 1) + 1000 * popcount(tree mask row i)
//                      + 100000 * (i < token_count)
#include <bit>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/codegen/nvrtc_compile.h"
#include "compiler/synth/presets.h"
#include "schemas/plan_model.h"

namespace kplan::testing {

inline constexpr int64_t kToyVocab = 40;
inline constexpr int64_t kToyContext = 64;
inline constexpr float kToyScale = 0.5f;

inline const char* toy_kernel_source() {
  return R"(
extern "C" __global__ void toy_step(float* logits, const float* w, const int* tokens, const int* positions,
                                    const unsigned* tree_mask, const int* cache_length, const int* token_count,
                                    float* kv, int vocab, int words, float scale) {
  int i = blockIdx.x;
  int S = *cache_length;
  float kvsum = 0.f;
  for (int r = 0; r < S; ++r) kvsum += kv[r] * (float)(r + 1);
  int bits = 0;
  for (int k = 0; k < words; ++k) bits += __popc(tree_mask[i * words + k]);
  float base = (float)tokens[i] + 10.f * (float)positions[i] + kvsum + 1000.f * (float)bits +
               (i < *token_count ? 100000.f : 0.f);
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) logits[i * vocab + v] = w[v] * scale + base;
  __syncthreads();
  if (threadIdx.x == 0) kv[S + i] = (float)tokens[i];
}
)";
}

inline std::vector<uint8_t> toy_cubin(const std::string& arch) {
  codegen::KernelSource src;
  src.family = "toy";
  src.id = "toy_step";
  src.entry = "toy_step";
  src.source = toy_kernel_source();
  return codegen::nvrtc_compile(src, {}, codegen::nvrtc_options(arch));
}

// The tiny preset's config with the toy's vocabulary (the runtime reads vocab from it).
inline std::string toy_config_json() {
  nlohmann::json j = model_config_to_json(preset_config("tiny"));
  j["vocab_size"] = kToyVocab;
  return j.dump(2);
}

// Buckets of 1 and 4 tokens; kernels for each arch in `archs`.
inline plan::Plan toy_plan(const std::vector<std::string>& archs) {
  using namespace plan;
  Plan p;
  p.header.compiler_version = "test";
  p.header.archs = archs;
  p.header.limits = {4, 4, kToyContext};
  p.model = preset_config("tiny");
  p.model.vocab_size = kToyVocab;
  p.model_config_json = toy_config_json();
  Kernel k;
  k.id = "toy_step";
  k.entry = "toy_step";
  k.family = "toy";
  k.params = {ParamType::Pointer, ParamType::Pointer, ParamType::Pointer, ParamType::Pointer, ParamType::Pointer,
              ParamType::Pointer, ParamType::Pointer, ParamType::Pointer, ParamType::I32,     ParamType::I32,
              ParamType::F32};
  for (const std::string& a : archs) k.binaries.push_back({a, toy_cubin(a)});
  p.kernels = {k};
  Weight w;
  w.name = "lm_head.weight";
  w.dtype = DType::F32;
  w.shape = {kToyVocab};
  w.owned.resize(kToyVocab * 4);
  for (int64_t v = 0; v < kToyVocab; ++v) {
    float f = static_cast<float>(v) - 7.0f;
    std::memcpy(w.owned.data() + v * 4, &f, 4);
  }
  p.weights = {w};
  p.buffers.slots = {{"tokens", SlotRole::Input, 0, 16, 256},      {"positions", SlotRole::Input, 0, 16, 256},
                     {"tree_mask", SlotRole::Input, 0, 16, 256},   {"cache_length", SlotRole::Input, 0, 4, 256},
                     {"token_count", SlotRole::Input, 0, 4, 256},  {"kv", SlotRole::Persistent, 0, kToyContext * 4, 256},
                     {"logits", SlotRole::Output, 0, 4 * kToyVocab * 4, 256}};
  assign_arena_offsets(p.buffers);
  p.step_inputs = {{StepInputKind::Tokens, 0}, {StepInputKind::Positions, 1}, {StepInputKind::TreeMask, 2},
                   {StepInputKind::CacheLength, 3}, {StepInputKind::TokenCount, 4}};
  p.kv_caches = {{"toy.kv", 5, 4, kToyContext}};
  for (uint32_t t : {1u, 4u}) {
    Bucket b;
    b.tokens = t;
    Launch l;
    l.kernel = 0;
    l.grid = {t, 1, 1};
    l.block = {32, 1, 1};
    l.args = {LaunchArg::buffer(6),
              LaunchArg::weight(0),
              LaunchArg::step_input(StepInputKind::Tokens),
              LaunchArg::step_input(StepInputKind::Positions),
              LaunchArg::step_input(StepInputKind::TreeMask),
              LaunchArg::step_input(StepInputKind::CacheLength),
              LaunchArg::step_input(StepInputKind::TokenCount),
              LaunchArg::buffer(5),
              LaunchArg::i32(kToyVocab),
              LaunchArg::i32(static_cast<int32_t>((t + 31) / 32)),
              LaunchArg::f32(kToyScale)};
    b.launches = {l};
    b.outputs = {{OutputKind::Logits, -1, 6, 0, DType::F32, t, kToyVocab}};
    p.buckets.push_back(b);
  }
  return p;
}

// The host's model of the toy plan: the same formula over its own copy of the KV cache.
class ToyReference {
 public:
  std::vector<float> forward(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                             const std::vector<uint32_t>& mask) {
    const int64_t t = static_cast<int64_t>(tokens.size());
    const int64_t words = (t + 31) / 32;
    float kvsum = 0.f;
    for (size_t r = 0; r < kv_.size(); ++r) kvsum += kv_[r] * static_cast<float>(r + 1);
    std::vector<float> logits(static_cast<size_t>(t * kToyVocab));
    for (int64_t i = 0; i < t; ++i) {
      int bits = 0;
      if (mask.empty()) bits = static_cast<int>(i + 1);
      else
        for (int64_t k = 0; k < words; ++k) bits += std::popcount(mask[static_cast<size_t>(i * words + k)]);
      float base = static_cast<float>(tokens[static_cast<size_t>(i)]) + 10.f * static_cast<float>(positions[static_cast<size_t>(i)]) +
                   kvsum + 1000.f * static_cast<float>(bits) + 100000.f;
      for (int64_t v = 0; v < kToyVocab; ++v)
        logits[static_cast<size_t>(i * kToyVocab + v)] = (static_cast<float>(v) - 7.0f) * kToyScale + base;
    }
    pending_ = tokens;
    return logits;
  }
  void commit(const std::vector<int32_t>& keep) {
    for (int32_t k : keep) kv_.push_back(static_cast<float>(pending_[static_cast<size_t>(k)]));
  }

 private:
  std::vector<float> kv_;
  std::vector<int32_t> pending_;
};

}  // namespace kplan::testing
