// Writing safetensors files (single or sharded like HuggingFace's save_pretrained). Tensors are
// produced one at a time so a large synthetic checkpoint never sits in memory whole.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compiler/frontend/safetensors.h"
#include "ir/support/error.h"

namespace kplan {

namespace fs = std::filesystem;

uint64_t TensorHeader::byte_size() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

namespace {

TensorHeader header_of(const TensorData& t) { return {t.name, t.dtype, t.shape}; }

std::vector<TensorHeader> headers_of(const std::vector<TensorData>& tensors) {
  std::vector<TensorHeader> out;
  out.reserve(tensors.size());
  for (const TensorData& t : tensors) out.push_back(header_of(t));
  return out;
}

// "model-00002-of-00005.safetensors": HF's five-digit shard names.
std::string shard_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

}  // namespace

void write_safetensors_streamed(const fs::path& file, const std::vector<TensorHeader>& headers,
                                const TensorProducer& produce,
                                const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps __metadata__ first and tensors in writing order: easy to read by eye.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const TensorHeader& h : headers) {
    if (header.contains(h.name)) throw Error("write " + file.string() + ": tensor " + h.name + " given twice");
    uint64_t size = h.byte_size();
    header[h.name] = {{"dtype", std::string(dtype_safetensors_name(h.dtype))},
                      {"shape", h.shape},
                      {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot create " + file.string());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (size_t i = 0; i < headers.size(); ++i) {
    std::vector<uint8_t> bytes = produce(i);
    if (bytes.size() != headers[i].byte_size())
      throw Error("write " + file.string() + ": tensor " + headers[i].name + " has " +
                  std::to_string(bytes.size()) + " bytes, its shape needs " +
                  std::to_string(headers[i].byte_size()));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  out.close();
  if (!out) throw Error("write " + file.string() + ": I/O error (disk full?)");
}

void write_safetensors(const fs::path& file, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_safetensors_streamed(
      file, headers_of(tensors), [&tensors](size_t i) { return tensors[i].bytes; }, metadata);
}

std::vector<std::string> write_sharded_safetensors_streamed(
    const fs::path& dir, const std::vector<TensorHeader>& headers, const TensorProducer& produce,
    uint64_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes == 0) throw Error("write " + dir.string() + ": shard size limit must be > 0");
  // Greedy split in order: a shard closes when the next tensor would push it past the limit.
  std::vector<std::vector<size_t>> shards;
  uint64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < headers.size(); ++i) {
    uint64_t size = headers[i].byte_size();
    if (shards.empty() || (in_shard > 0 && in_shard + size > max_shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += size;
    total += size;
  }
  if (shards.empty()) shards.emplace_back();

  fs::create_directories(dir);
  std::vector<std::string> names;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shard_name(s, shards.size());
    std::vector<TensorHeader> shard_headers;
    for (size_t i : shards[s]) {
      shard_headers.push_back(headers[i]);
      weight_map[headers[i].name] = name;
    }
    const std::vector<size_t>& members = shards[s];
    write_safetensors_streamed(
        dir / name, shard_headers, [&](size_t j) { return produce(members[j]); }, metadata);
    names.push_back(name);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::ofstream out(index_path, std::ios::trunc);
  if (!out) throw Error("cannot create " + index_path.string());
  out << index.dump(2) << "\n";
  out.close();
  if (!out) throw Error("write " + index_path.string() + ": I/O error");
  return names;
}

void write_sharded_safetensors(const fs::path& dir, const std::vector<TensorData>& tensors,
                               uint64_t max_shard_bytes,
                               const std::map<std::string, std::string>& metadata) {
  write_sharded_safetensors_streamed(
      dir, headers_of(tensors), [&tensors](size_t i) { return tensors[i].bytes; },
      max_shard_bytes, metadata);
}

}  // namespace kplan
