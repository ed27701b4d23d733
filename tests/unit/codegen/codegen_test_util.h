#pragma once
// Helpers shared by the codegen tests: test configs, seeded values and fresh temporary cache
// directories.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "ir/support/dtype.h"
#include "tests/unit/test_support.h"

namespace kplan::codegen::testing_util {

inline ModelConfig test_config(const std::string& name) {
  if (name == "kimi-k2.6") return load_model_config(std::string(KPLAN_TEST_DATA_DIR) + "/kimi-k2.6/config.json");
  return load_model_config(std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + name + ".json");
}

inline DraftConfig test_draft_config(const std::string& name) {
  return load_draft_config(std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + name + ".json");
}

// tiny's config.json (tests/data/configs/tiny.json) with `fields` set to these JSON values (e.g.
// 16 heads, which the tensor-core MLA partials need), written to `path` for `kplan synth --config`
// or `kplan compile --model`.
inline void write_tiny_config_with(const std::filesystem::path& path, const std::map<std::string, std::string>& fields) {
  std::ifstream in(std::string(KPLAN_TEST_DATA_DIR) + "/configs/tiny.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [name, value] : fields) {
    const std::string field = "\"" + name + "\"";
    const size_t at = text.find(field);
    EXPECT_NE(at, std::string::npos) << field;
    if (at != std::string::npos) text.replace(at, text.find(',', at) - at, field + ": " + value);
  }
  std::ofstream(path) << text;
}

// max |got - want| relative to max |want| (sizes must match).
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0, mag = 1e-12;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
    mag = std::max(mag, static_cast<double>(std::fabs(want[i])));
  }
  return err / mag;
}

// n values uniform in [-scale, scale) from a xorshift64 stream of `seed` (the host-shim tests'
// inputs: cheap, and the same on every platform).
inline std::vector<float> xorshift_uniform(size_t n, uint64_t seed, float scale = 1.f) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<float> v(n);
  for (float& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = scale * (static_cast<float>(s >> 40) / 16777216.f * 2.f - 1.f);
  }
  return v;
}

// The values as bf16 bits (rounded to nearest even), and the values those bits hold.
inline std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b;
  b.reserve(v.size());
  for (float x : v) b.push_back(float_to_bf16(x));
  return b;
}
inline std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}

// y[t, n] = x[t, :] . w[n, :] in double (x [T, K], w [N, K] row-major): the host-shim tests'
// reference for the dense templates.
inline std::vector<float> reference_matmul(const std::vector<float>& x, const std::vector<float>& w, int T, int N, int K) {
  std::vector<float> y(static_cast<size_t>(T) * N);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += static_cast<double>(x[static_cast<size_t>(t) * K + k]) * w[static_cast<size_t>(n) * K + k];
      y[static_cast<size_t>(t) * N + n] = static_cast<float>(s);
    }
  return y;
}

// A new empty directory for a test's kernel cache, removed when the object goes away.
class TempDir : public ::kplan::testing_util::TempDir {
 public:
  TempDir() : ::kplan::testing_util::TempDir("codegen") {}
};

}  // namespace kplan::codegen::testing_util
