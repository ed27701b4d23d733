// JSON from untrusted files (issue 12): a safetensors header or shard index nesting a value
// 200,000 levels deep overflowed the stack (SIGSEGV) where it was printed; a number like 1e400
// ended in "internal error" ([json.exception.out_of_range.406]). Both are refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/frontend/json_fields.h"
#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "tests/unit/frontend/test_util.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using testing_util::error_of;
using testing_util::expect_contains;

std::string nested(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }

void write_safetensors(const fs::path& p, const std::string& header) {
  std::ofstream f(p, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << std::string(4, '\0');
}

TEST(HostileJson, ADeeplyNestedSafetensorsHeaderIsRefused) {
  testing_util::TempDir dir("kplan_json");
  write_safetensors(dir.path() / "model.safetensors",
                    R"({"a":{"dtype":"F32","shape":)" + nested(200000) + R"(,"data_offsets":[0,4]}})");
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir.path()); }),
                  {"model.safetensors", "header is not valid JSON", "nest deeper than 64 levels"});
}

TEST(HostileJson, AShardIndexWithDeeplyNestedMetadataIsRefused) {
  testing_util::TempDir dir("kplan_json");
  write_safetensors(dir.path() / "model-00001-of-00001.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
  std::ofstream(dir.path() / "model.safetensors.index.json")
      << R"({"metadata":{"x":)" << nested(100000) << R"(},"weight_map":{"a":"model-00001-of-00001.safetensors"}})";
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir.path()); }),
                  {"model.safetensors.index.json", "not valid JSON", "nest deeper than 64 levels"});
}

TEST(HostileJson, ANumberThatOverflowsADoubleIsRefusedByName) {
  testing_util::TempDir dir("kplan_json");
  std::ofstream(dir.path() / "config.json") << R"({"model_type": "deepseek_v3", "rope_theta": 1e400})";
  expect_contains(error_of([&] { load_model_config(dir.path() / "config.json"); }),
                  {"config.json", "bad JSON", "number overflow"});
}

TEST(HostileJson, NestingUpToTheLimitParsesAndStringsDoNotCount) {
  EXPECT_NO_THROW(parse_json_bounded(nested(kMaxJsonDepth)));
  EXPECT_THROW(parse_json_bounded(nested(kMaxJsonDepth + 1)), JsonTextError);
  EXPECT_NO_THROW(parse_json_bounded("{\"k\": \"" + std::string(1000, '[') + "\\\" [[\"}"));
}

}  // namespace
}  // namespace kplan
