#pragma once
// safetensors files, read by mmap and lazily: a single file or a sharded set described by
// model.safetensors.index.json. Headers are validated on open (JSON, header length, dtypes,
// offsets in range and non-overlapping, sizes matching shapes); every error names the file.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kplan {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;  // mapped file memory; valid while the file stays open
  std::string file;                // which shard it lives in (for errors)
  int64_t numel() const;
};

class SafetensorsFile;  // one mmap-ed file

// All tensors of a checkpoint directory (or of one .safetensors file).
class SafetensorsCheckpoint {
 public:
  // `path`: a directory holding model.safetensors.index.json or *.safetensors, or one file.
  static SafetensorsCheckpoint open(const std::filesystem::path& path);
  ~SafetensorsCheckpoint();
  SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept;
  SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) noexcept;

  bool contains(const std::string& name) const;
  // Throws kplan::Error naming the tensor when absent.
  const TensorView& get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsCheckpoint();
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writing (for `kplan synth` and tests). Tensors are written in the order given.
struct TensorData {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Splits tensors over shards of at most `max_shard_bytes` named
// model-0000N-of-0000M.safetensors, and writes model.safetensors.index.json.
void write_sharded_safetensors(const std::filesystem::path& dir,
                               const std::vector<TensorData>& tensors, uint64_t max_shard_bytes);

}  // namespace kplan
