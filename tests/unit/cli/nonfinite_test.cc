// A checkpoint with one NaN or infinity in a weight is refused by tensor name, both where the CPU
// reference reads it (`kplan run DIR`) and where `kplan compile -o` copies it into a plan; before,
// one NaN weight decoded as token 0 forever with exit status 0. Finite weights whose activations
// overflow give logits that are refused the same way, greedy and sampled. first_non_finite itself,
// per dtype.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/support/dtype.h"
#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

// Overwrites element `index` of tensor `name` (bf16) in DIR/model.safetensors with `bits`.
void poke_bf16(const fs::path& dir, const std::string& name, int64_t index, uint16_t bits) {
  std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  const auto h = nlohmann::json::parse(header);
  ASSERT_EQ(h.at(name).at("dtype"), "BF16");
  const uint64_t begin = h.at(name).at("data_offsets")[0].get<uint64_t>();
  f.seekp(static_cast<std::streamoff>(8 + header_len + begin + 2 * index));
  f.write(reinterpret_cast<const char*>(&bits), 2);
}

TEST(NonFiniteWeights, RunAndCompileRefuseTheTensorByName) {
  testing_util::TempDir dir("nonfinite");
  const test::SynthPair pair = test::synth_tiny_pair(dir.path());
  poke_bf16(pair.target, "model.layers.2.self_attn.o_proj.weight", 77, 0x7FC0);  // a quiet NaN
  const test::CliResult run = test::run_kplan("run " + pair.target.string() + " --prompt-ids 1,2,3 --max-new 4 --device cpu", dir.path());
  EXPECT_EQ(run.status, 1);
  testing_util::expect_contains(run.err, {"model.layers.2.self_attn.o_proj.weight", "NaN or infinity", "element 77"});
  EXPECT_EQ(run.out, "") << "no tokens are printed from a damaged model";

  poke_bf16(pair.target, "model.layers.2.self_attn.o_proj.weight", 77, 0x3F80);  // repaired: 1.0
  poke_bf16(pair.draft, "fc.weight", 3, 0xFF80);                                 // -infinity in the drafter
  const test::CliResult compile = test::run_kplan("compile --model " + pair.target.string() + " --draft " +
                                                      pair.draft.string() + " --arch sm_90 -o " +
                                                      (dir.path() / "x.kplan").string(),
                                                  dir.path());
  EXPECT_EQ(compile.status, 1);
  testing_util::expect_contains(compile.err, {"fc.weight", "NaN or infinity", "element 3"});
  EXPECT_FALSE(fs::exists(dir.path() / "x.kplan"));
}

TEST(NonFiniteWeights, LogitsThatOverflowAreRefusedNotDecodedAsTokenZero) {
  testing_util::TempDir dir("overflow");
  const test::SynthPair pair = test::synth_tiny_pair(dir.path());
  for (int64_t i = 0; i < 256; ++i)  // the final norm's weights at bf16's largest finite value
    poke_bf16(pair.target, "model.norm.weight", i, 0x7F7F);
  for (const std::string mode : {"--spec none", "--spec ddtree --drafter random", "--temperature 0.7"}) {
    SCOPED_TRACE(mode);
    const test::CliResult r =
        test::run_kplan("run " + pair.target.string() + " --prompt-ids 1,2,3 --max-new 4 --device cpu " + mode, dir.path());
    EXPECT_EQ(r.status, 1);
    testing_util::expect_contains(r.err, {"logits", "not finite", "overflowed"});
    EXPECT_EQ(r.out, "");
  }
}

TEST(NonFiniteWeights, FirstNonFiniteReadsEachFloatDtype) {
  const uint16_t bf16[] = {0x3F80, 0xC000, 0x7F80, 0x0001};  // 1, -2, +inf, a subnormal
  EXPECT_EQ(first_non_finite(reinterpret_cast<const uint8_t*>(bf16), DType::BF16, 4), 2);
  EXPECT_EQ(first_non_finite(reinterpret_cast<const uint8_t*>(bf16), DType::BF16, 2), -1);
  const uint16_t f16[] = {0x3C00, 0x7BFF, 0xFE00};  // 1, the largest finite, a NaN
  EXPECT_EQ(first_non_finite(reinterpret_cast<const uint8_t*>(f16), DType::F16, 3), 2);
  EXPECT_EQ(first_non_finite(reinterpret_cast<const uint8_t*>(f16), DType::F16, 2), -1);
  const float f32[] = {1.0f, 3.4e38f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(first_non_finite(reinterpret_cast<const uint8_t*>(f32), DType::F32, 3), 2);
  EXPECT_EQ(first_non_finite(reinterpret_cast<const uint8_t*>(f32), DType::F32, 2), -1);
}

}  // namespace
}  // namespace kplan
