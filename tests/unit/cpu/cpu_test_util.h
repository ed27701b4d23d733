#pragma once
// Shared helpers for the CPU backend tests: synthesised checkpoints in temp dirs (made once per
// test binary), random matrices, and step inputs.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/synth/synth.h"
#include "runtime/step_model.h"
#include "tests/unit/test_support.h"

namespace kplan::cpu_test {

struct SynthDirs {
  std::filesystem::path target, draft;
};

// `kplan synth PRESET --seed SEED [--int4] --draft ...` into a temp dir, once per process.
inline const SynthDirs& synth_preset(const std::string& preset, uint64_t seed = 1, bool int4 = false) {
  static testing_util::TempDir temp_root("cpu");  // removed when the process exits
  static std::map<std::string, SynthDirs> made;
  const std::string key = preset + "/" + std::to_string(seed) + (int4 ? "/int4" : "");
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  const auto root = temp_root.path() / key;
  std::filesystem::create_directories(root);
  SynthDirs dirs;
  dirs.target = root / "target";
  dirs.draft = root / "draft";
  ModelConfig config = preset_config(preset);
  if (int4) config.quant = k26_int4_quant_config();
  SynthOptions options;
  options.seed = seed;
  synthesize_target(config, dirs.target, options);
  synthesize_draft(preset_draft_config(preset), dirs.draft, options);
  return made.emplace(key, dirs).first->second;
}

inline Matrix random_matrix(int64_t rows, int64_t cols, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  Matrix m(rows, cols);
  for (float& v : m.data) v = dist(rng);
  return m;
}

// Relative error ||a - b|| / ||b|| of two rows.
inline double relative_error(const float* a, const float* b, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline StepInput causal_step(const std::vector<int32_t>& tokens, int32_t first_position) {
  StepInput in;
  in.tokens = tokens;
  for (size_t i = 0; i < tokens.size(); ++i) in.positions.push_back(first_position + static_cast<int32_t>(i));
  return in;
}

}  // namespace kplan::cpu_test
