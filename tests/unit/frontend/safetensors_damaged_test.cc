// Damaged safetensors files and sharded sets: each class is refused with its own message, and
// every message names the file.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "compiler/frontend/safetensors.h"
#include "tests/unit/frontend/test_util.h"

namespace kplan {
namespace {

using namespace testing_util;
namespace fs = std::filesystem;

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file with the given header text and `data_bytes` zero bytes of data.
std::string file_with_header(const std::string& header, size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\0');
}

class DamagedFile : public ::testing::Test {
 protected:
  // Writes `contents` as bad.safetensors, opens it, and returns the error message.
  std::string open_error(const std::string& contents) {
    const fs::path file = dir_.path() / "bad.safetensors";
    write_bytes(file, contents);
    std::string msg = error_of([&] { SafetensorsCheckpoint::open(file); });
    expect_contains(msg, {file.string()});
    return msg;
  }
  TempDir dir_{"st_damaged"};
};

TEST_F(DamagedFile, ShorterThanHeaderLength) {
  expect_contains(open_error("abc"), {"shorter than 8 bytes"});
  expect_contains(open_error(""), {"shorter than 8 bytes"});
}

TEST_F(DamagedFile, HeaderLengthPastEnd) {
  expect_contains(open_error(le64(1000) + "{}"), {"header length 1000", "past the end of the file"});
  // A length so large that 8 + length wraps around must not slip through.
  expect_contains(open_error(le64(~uint64_t{0}) + "{}"), {"past the end of the file"});
}

TEST_F(DamagedFile, HeaderNotJson) {
  expect_contains(open_error(file_with_header("{\"a\": [1, 2", 0)), {"not valid JSON"});
}

TEST_F(DamagedFile, HeaderNotObject) {
  expect_contains(open_error(file_with_header("[1, 2, 3]", 0)), {"not a JSON object"});
}

TEST_F(DamagedFile, UnknownDtype) {
  expect_contains(open_error(file_with_header(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2)),
                  {"tensor w", "unsupported dtype 'Q4'"});
}

TEST_F(DamagedFile, DataOffsetsNotIntegerPair) {
  for (const std::string offsets : {"[0.5,4]", "[0]", "\"0-4\"", "[4,0]", "[-4,0]"}) {
    std::string header = R"({"w":{"dtype":"U8","shape":[4],"data_offsets":)" + offsets + "}}";
    expect_contains(open_error(file_with_header(header, 4)), {"tensor w", "data_offsets must be [begin, end]"});
  }
  expect_contains(open_error(file_with_header(R"({"w":{"dtype":"U8","shape":[4]}})", 4)),
                  {"tensor w", "data_offsets"});
}

TEST_F(DamagedFile, TruncatedDataSection) {
  // The header promises 16 bytes but the file ends after 10: a cut-off download.
  expect_contains(open_error(file_with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 10)),
                  {"tensor w", "past the end of the data section (10 bytes)"});
}

TEST_F(DamagedFile, SizeDoesNotMatchShape) {
  expect_contains(open_error(file_with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
                  {"tensor w", "span 8 bytes", "F32 [3] needs 12"});
}

TEST_F(DamagedFile, OverlappingTensors) {
  std::string header =
      R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})";
  expect_contains(open_error(file_with_header(header, 12)), {"tensors a and b", "overlapping"});
}

TEST_F(DamagedFile, BadShape) {
  expect_contains(open_error(file_with_header(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", 0)),
                  {"tensor w", "not a non-negative integer"});
  expect_contains(open_error(file_with_header(R"({"w":{"dtype":"U8","shape":"4","data_offsets":[0,4]}})", 4)),
                  {"tensor w", "shape"});
  // 2^40 * 2^40 elements overflows 64 bits.
  expect_contains(
      open_error(file_with_header(
          R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}})", 4)),
      {"tensor w", "overflows"});
}

TEST_F(DamagedFile, BadMetadata) {
  expect_contains(open_error(file_with_header(R"({"__metadata__":{"format":1}})", 0)), {"__metadata__", "format"});
  expect_contains(open_error(file_with_header(R"({"__metadata__":[1]})", 0)), {"__metadata__ is not an object"});
}

TEST(DamagedCheckpoint, PathMissing) {
  expect_contains(error_of([] { SafetensorsCheckpoint::open("/nonexistent/kplan/ckpt"); }),
                  {"/nonexistent/kplan/ckpt", "no such file or directory"});
}

TEST(DamagedCheckpoint, DirectoryWithoutSafetensors) {
  TempDir dir("st_empty");
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir.path()); }),
                  {dir.path().string(), "no .safetensors file"});
}

TEST(DamagedCheckpoint, SeveralFilesWithoutIndex) {
  TempDir dir("st_noindex");
  write_safetensors(dir.path() / "a.safetensors", {{"x", DType::U8, {1}, {1}}});
  write_safetensors(dir.path() / "b.safetensors", {{"y", DType::U8, {1}, {1}}});
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir.path()); }),
                  {"2 .safetensors files", "model.safetensors.index.json"});
}

// A valid two-shard checkpoint whose index the tests then damage.
class DamagedIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    write_sharded_safetensors(dir_.path(), {{"x", DType::U8, {4}, {1, 2, 3, 4}}, {"y", DType::U8, {4}, {5, 6, 7, 8}}},
                              4);
    std::ifstream in(index_path());
    index_ = nlohmann::json::parse(in);
  }
  fs::path index_path() const { return dir_.path() / "model.safetensors.index.json"; }
  std::string open_error_with(const nlohmann::json& index) {
    std::ofstream(index_path(), std::ios::trunc) << index.dump();
    return error_of([&] { SafetensorsCheckpoint::open(dir_.path()); });
  }
  TempDir dir_{"st_index"};
  nlohmann::json index_;
};

TEST_F(DamagedIndex, ValidSetOpens) {
  auto ckpt = SafetensorsCheckpoint::open(dir_.path());
  EXPECT_EQ(ckpt.get("y").bytes[3], 8);
  EXPECT_EQ(ckpt.metadata().at("total_size"), "8");
}

TEST_F(DamagedIndex, NamesMissingShard) {
  index_["weight_map"]["y"] = "model-00009-of-00009.safetensors";
  expect_contains(open_error_with(index_), {"model.safetensors.index.json", "model-00009-of-00009.safetensors",
                                            "does not exist"});
}

TEST_F(DamagedIndex, TensorAbsentFromItsShard) {
  index_["weight_map"]["z"] = "model-00001-of-00002.safetensors";
  expect_contains(open_error_with(index_), {"tensor z", "model-00001-of-00002.safetensors", "does not hold it"});
}

TEST_F(DamagedIndex, TensorInTwoShards) {
  // Rewrite shard 2 so it also holds x.
  write_safetensors(dir_.path() / "model-00002-of-00002.safetensors",
                    {{"y", DType::U8, {4}, {5, 6, 7, 8}}, {"x", DType::U8, {4}, {9, 9, 9, 9}}});
  expect_contains(open_error_with(index_), {"tensor x", "appears in both", "model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors"});
}

TEST_F(DamagedIndex, IndexNotJsonOrWithoutWeightMap) {
  std::ofstream(index_path(), std::ios::trunc) << "{oops";
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir_.path()); }),
                  {"model.safetensors.index.json", "not valid JSON"});
  expect_contains(open_error_with({{"metadata", {}}}), {"model.safetensors.index.json", "no weight_map"});
}

TEST_F(DamagedIndex, ShardNameOutsideDirectory) {
  index_["weight_map"]["y"] = "../elsewhere.safetensors";
  expect_contains(open_error_with(index_), {"not a plain file name"});
  // ".." and "." are their own filename(): they name the folder's parent and the folder itself.
  index_["weight_map"]["y"] = "..";
  expect_contains(open_error_with(index_), {"'..'", "not a plain file name"});
  index_["weight_map"]["y"] = ".";
  expect_contains(open_error_with(index_), {"'.'", "not a plain file name"});
}

TEST_F(DamagedIndex, DamagedShardIsNamed) {
  write_bytes(dir_.path() / "model-00002-of-00002.safetensors", "tiny");
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir_.path()); }),
                  {"model-00002-of-00002.safetensors", "shorter than 8 bytes"});
}

}  // namespace
}  // namespace kplan
