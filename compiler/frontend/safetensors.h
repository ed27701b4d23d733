#pragma once
// safetensors files, read by mmap and lazily: a single file or a sharded set described by
// model.safetensors.index.json. Headers are validated on open (JSON, header length, dtypes,
// offsets in range and non-overlapping, sizes matching shapes); every error names the file.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/support/dtype.h"

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
  // `on_files` (may be empty): (0, files) once the files are known, then (i, files) as the i-th
  // is opened and its header validated.
  using FileProgress = std::function<void(uint64_t files_done, uint64_t files_total)>;
  static SafetensorsCheckpoint open(const std::filesystem::path& path, const FileProgress& on_files = {});
  ~SafetensorsCheckpoint();
  SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept;
  SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) noexcept;

  bool contains(const std::string& name) const;
  // Throws kplan::Error naming the tensor when absent.
  const TensorView& get(const std::string& name) const;
  std::vector<std::string> names() const;
  // Replaces a bf16 / f16 tensor by its f32 widening (held here); f32 ones are left as they are.
  // Throws kplan::Error naming the tensor for any other dtype.
  void widen_to_f32(const std::string& name);
  // Replaces an f32 / f16 tensor by its bf16 rounding (to nearest even, held here).
  void narrow_to_bf16(const std::string& name);
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsCheckpoint();
  void convert_float(const std::string& name, DType to);  // to F32 or BF16
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> tensors_;
  std::vector<std::vector<uint8_t>> converted_;  // the bytes of tensors widen / narrow replaced
  std::map<std::string, std::string> metadata_;
};

// Writing (for `kplan synth` and tests). Tensors are written in the order given, contiguously,
// after an 8-byte little-endian header length and a JSON header padded with spaces to a multiple
// of 8 bytes (so the data section starts 8-byte aligned).
struct TensorData {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Splits tensors over shards of at most `max_shard_bytes` (a tensor larger than that gets a
// shard of its own) named model-0000N-of-0000M.safetensors, and writes
// model.safetensors.index.json (metadata.total_size, weight_map) beside them.
void write_sharded_safetensors(const std::filesystem::path& dir,
                               const std::vector<TensorData>& tensors, uint64_t max_shard_bytes,
                               const std::map<std::string, std::string>& metadata = {
                                   {"format", "pt"}});

// Streaming variants: only the headers are held up front; `produce(i)` returns the bytes of
// tensor i (exactly numel * dtype size) when its turn comes, so a writer never holds the whole
// checkpoint in memory.
struct TensorHeader {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t byte_size() const;
};
using TensorProducer = std::function<std::vector<uint8_t>(size_t index)>;
void write_safetensors_streamed(const std::filesystem::path& file,
                                const std::vector<TensorHeader>& headers,
                                const TensorProducer& produce,
                                const std::map<std::string, std::string>& metadata = {});
// Returns the shard file names written, in order.
std::vector<std::string> write_sharded_safetensors_streamed(
    const std::filesystem::path& dir, const std::vector<TensorHeader>& headers,
    const TensorProducer& produce, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace kplan
