// safetensors writing and reading: single files, directories, shards, every dtype.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compiler/frontend/safetensors.h"
#include "tests/unit/frontend/test_util.h"

namespace kplan {
namespace {

using namespace testing_util;
namespace fs = std::filesystem;

TensorData make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, uint8_t salt) {
  TensorData t{name, dtype, std::move(shape), {}};
  uint64_t n = dtype_size(dtype);
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  t.bytes.resize(n);
  for (uint64_t i = 0; i < n; ++i) t.bytes[i] = static_cast<uint8_t>(i * 31 + salt);
  return t;
}

std::vector<TensorData> every_dtype() {
  return {make_tensor("a.bf16", DType::BF16, {3, 5}, 1),   make_tensor("b.f16", DType::F16, {7}, 2),
          make_tensor("c.f32", DType::F32, {2, 3, 4}, 3),  make_tensor("d.i32", DType::I32, {2}, 4),
          make_tensor("e.i8", DType::I8, {9}, 5),          make_tensor("f.u8", DType::U8, {1, 1}, 6),
          make_tensor("g.f8", DType::F8E4M3, {4, 4}, 7),   make_tensor("h.i64", DType::I64, {3}, 8),
          make_tensor("i.bool", DType::BOOL, {5}, 9),      make_tensor("j.scalar", DType::F32, {}, 10),
          make_tensor("k.empty", DType::BF16, {0, 3}, 11)};
}

void expect_same(const SafetensorsCheckpoint& ckpt, const std::vector<TensorData>& tensors) {
  ASSERT_EQ(ckpt.names().size(), tensors.size());
  for (const TensorData& t : tensors) {
    ASSERT_TRUE(ckpt.contains(t.name)) << t.name;
    const TensorView& v = ckpt.get(t.name);
    EXPECT_EQ(v.dtype, t.dtype) << t.name;
    EXPECT_EQ(v.shape, t.shape) << t.name;
    ASSERT_EQ(v.bytes.size(), t.bytes.size()) << t.name;
    EXPECT_TRUE(std::equal(v.bytes.begin(), v.bytes.end(), t.bytes.begin())) << t.name;
  }
}

TEST(SafetensorsRoundTrip, EveryDtypeSingleFile) {
  TempDir dir("st_single");
  const auto tensors = every_dtype();
  write_safetensors(dir.path() / "x.safetensors", tensors, {{"format", "pt"}, {"note", "hi"}});
  auto ckpt = SafetensorsCheckpoint::open(dir.path() / "x.safetensors");
  expect_same(ckpt, tensors);
  EXPECT_EQ(ckpt.metadata().at("format"), "pt");
  EXPECT_EQ(ckpt.metadata().at("note"), "hi");
  EXPECT_EQ(ckpt.get("c.f32").numel(), 24);
  EXPECT_EQ(ckpt.get("j.scalar").numel(), 1);
  EXPECT_EQ(ckpt.get("k.empty").numel(), 0);
  EXPECT_NE(ckpt.get("a.bf16").file.find("x.safetensors"), std::string::npos);
}

TEST(SafetensorsRoundTrip, FileLayoutIsTheSafetensorsFormat) {
  TempDir dir("st_layout");
  const auto tensors = every_dtype();
  const fs::path file = dir.path() / "x.safetensors";
  write_safetensors(file, tensors);
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(raw[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u) << "header must be padded to a multiple of 8";
  std::string header(raw.begin() + 8, raw.begin() + 8 + static_cast<long>(n));
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  EXPECT_LT(header.size() - last - 1, 8u) << "padding is spaces, fewer than 8";
  auto j = nlohmann::json::parse(header);
  EXPECT_FALSE(j.contains("__metadata__")) << "no metadata given, none written";
  // Tensors are contiguous, in the order given, from offset 0.
  uint64_t offset = 0;
  for (const TensorData& t : tensors) {
    EXPECT_EQ(j[t.name]["data_offsets"][0].get<uint64_t>(), offset) << t.name;
    offset += t.bytes.size();
    EXPECT_EQ(j[t.name]["data_offsets"][1].get<uint64_t>(), offset) << t.name;
    EXPECT_EQ(j[t.name]["dtype"].get<std::string>(), dtype_safetensors_name(t.dtype));
  }
  EXPECT_EQ(raw.size(), 8 + n + offset);
}

TEST(SafetensorsRoundTrip, DirectoryWithOneFile) {
  TempDir dir("st_dir");
  const auto tensors = every_dtype();
  write_safetensors(dir.path() / "model.safetensors", tensors);
  expect_same(SafetensorsCheckpoint::open(dir.path()), tensors);
}

TEST(SafetensorsRoundTrip, ShardedWithIndex) {
  TempDir dir("st_sharded");
  std::vector<TensorData> tensors;
  for (int i = 0; i < 10; ++i)
    tensors.push_back(make_tensor("t" + std::to_string(i), DType::U8, {100}, static_cast<uint8_t>(i)));
  tensors.push_back(make_tensor("big", DType::F32, {200}, 99));  // 800 bytes: a shard of its own
  write_sharded_safetensors(dir.path(), tensors, 250);
  // 5 shards of two 100-byte tensors, then one for the tensor over the limit.
  for (int s = 1; s <= 6; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00006.safetensors", s);
    EXPECT_TRUE(fs::exists(dir.path() / name)) << name;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "model-00007-of-00006.safetensors"));
  std::ifstream in(dir.path() / "model.safetensors.index.json");
  auto index = nlohmann::json::parse(in);
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), 1000u + 800u);
  EXPECT_EQ(index["weight_map"]["t0"], "model-00001-of-00006.safetensors");
  EXPECT_EQ(index["weight_map"]["t3"], "model-00002-of-00006.safetensors");
  EXPECT_EQ(index["weight_map"]["big"], "model-00006-of-00006.safetensors");

  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  expect_same(ckpt, tensors);
  EXPECT_EQ(ckpt.metadata().at("format"), "pt");
  EXPECT_NE(ckpt.get("t9").file.find("model-00005-of-00006"), std::string::npos);
}

TEST(SafetensorsRoundTrip, StreamedWriterCallsProducerInOrder) {
  TempDir dir("st_stream");
  std::vector<TensorHeader> headers = {{"x", DType::I32, {2}}, {"y", DType::U8, {3}}};
  std::vector<size_t> calls;
  write_safetensors_streamed(dir.path() / "s.safetensors", headers, [&](size_t i) {
    calls.push_back(i);
    return std::vector<uint8_t>(headers[i].byte_size(), static_cast<uint8_t>(i + 1));
  });
  EXPECT_EQ(calls, (std::vector<size_t>{0, 1}));
  auto ckpt = SafetensorsCheckpoint::open(dir.path() / "s.safetensors");
  EXPECT_EQ(ckpt.get("y").bytes[2], 2);
  // A producer returning the wrong size is refused by name.
  std::string msg = error_of([&] {
    write_safetensors_streamed(dir.path() / "bad.safetensors", headers,
                               [](size_t) { return std::vector<uint8_t>(1); });
  });
  expect_contains(msg, {"tensor x", "1 bytes"});
}

TEST(SafetensorsRoundTrip, MissingTensorIsNamed) {
  TempDir dir("st_missing");
  write_safetensors(dir.path() / "model.safetensors", every_dtype());
  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  EXPECT_FALSE(ckpt.contains("nope"));
  expect_contains(error_of([&] { ckpt.get("nope"); }),
                                {"tensor nope", "missing", "model.safetensors"});
}

}  // namespace
}  // namespace kplan
