// Reading safetensors checkpoints: each file is mmap-ed read-only and only its JSON header is
// parsed on open; tensor bytes stay in the page cache until someone touches them. Every header
// is validated up front so a damaged file is refused by name before anything is compiled.
#include "compiler/frontend/safetensors.h"

#include <system_error>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "compiler/frontend/json_fields.h"
#include "ir/support/error.h"
#include "ir/support/regular_file.h"

namespace kplan {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// A JSON value that is a non-negative integer fitting int64 (safetensors writes plain ints).
bool as_nonnegative_int(const nlohmann::json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = i;
    return true;
  }
  return false;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One mmap-ed .safetensors file and the tensors its header describes.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const fs::path& path) : path_(path.string()) {
    require_regular_file(path, "safetensors shard");
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // never blocks on a FIFO swapped in
    if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      fail(std::string("cannot stat: ") + std::strerror(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ < 8) {
      ::close(fd);
      fail("file is shorter than 8 bytes (" + std::to_string(size_) +
           " bytes), so it has no header length");
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) fail(std::string("cannot mmap: ") + std::strerror(err));
    base_ = static_cast<const uint8_t*>(p);
    try {
      parse_header();
    } catch (...) {
      ::munmap(const_cast<uint8_t*>(base_), size_);
      throw;
    }
  }
  ~SafetensorsFile() { ::munmap(const_cast<uint8_t*>(base_), size_); }
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    throw Error("safetensors file " + path_ + ": " + reason);
  }

  void parse_header() {
    uint64_t header_len = 0;
    for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(base_[i]) << (8 * i);
    if (header_len > size_ - 8)
      fail("header length " + std::to_string(header_len) + " runs past the end of the file (" +
           std::to_string(size_) + " bytes)");
    const char* text = reinterpret_cast<const char*>(base_ + 8);
    nlohmann::json header;
    try {
      header = parse_json_bounded(std::string_view(text, header_len));
    } catch (const JsonTextError& e) {
      fail(std::string("header is not valid JSON (") + e.what() + ")");
    }
    if (!header.is_object()) fail("header is not a JSON object");

    const uint64_t data_begin = 8 + header_len;
    const uint64_t data_size = size_ - data_begin;
    struct Range {
      uint64_t begin, end;
      std::string name;
    };
    std::vector<Range> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      if (name == "__metadata__") {
        read_metadata(it.value());
        continue;
      }
      const nlohmann::json& entry = it.value();
      if (!entry.is_object()) fail("tensor " + name + ": header entry is not an object");
      TensorView view;
      view.name = name;
      view.file = path_;

      auto dtype_it = entry.find("dtype");
      if (dtype_it == entry.end() || !dtype_it->is_string())
        fail("tensor " + name + ": missing or non-string dtype");
      auto dtype = dtype_from_safetensors_name(dtype_it->get<std::string>());
      if (!dtype) fail("tensor " + name + ": unsupported dtype '" + dtype_it->get<std::string>() + "'");
      view.dtype = *dtype;

      auto shape_it = entry.find("shape");
      if (shape_it == entry.end() || !shape_it->is_array())
        fail("tensor " + name + ": missing or non-array shape");
      uint64_t numel = 1;
      bool overflow = false;
      for (const auto& d : *shape_it) {
        int64_t dim = 0;
        if (!as_nonnegative_int(d, &dim))
          fail("tensor " + name + ": shape " + shape_it->dump() +
               " has a dimension that is not a non-negative integer");
        view.shape.push_back(dim);
        overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel);
      }
      uint64_t expected = 0;
      overflow = overflow || __builtin_mul_overflow(numel, dtype_size(view.dtype), &expected);
      if (overflow || numel > static_cast<uint64_t>(INT64_MAX))
        fail("tensor " + name + ": shape " + shape_text(view.shape) + " overflows");

      auto off_it = entry.find("data_offsets");
      int64_t begin = 0, end = 0;
      if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 ||
          !as_nonnegative_int((*off_it)[0], &begin) || !as_nonnegative_int((*off_it)[1], &end) ||
          end < begin)
        fail("tensor " + name + ": data_offsets must be [begin, end] with 0 <= begin <= end, got " +
             (off_it == entry.end() ? std::string("nothing") : off_it->dump()));
      if (static_cast<uint64_t>(end) > data_size)
        fail("tensor " + name + ": data_offsets [" + std::to_string(begin) + ", " +
             std::to_string(end) + "] run past the end of the data section (" +
             std::to_string(data_size) + " bytes)");
      uint64_t bytes = static_cast<uint64_t>(end - begin);
      if (bytes != expected)
        fail("tensor " + name + ": data_offsets span " + std::to_string(bytes) + " bytes but " +
             std::string(dtype_safetensors_name(view.dtype)) + " " + shape_text(view.shape) +
             " needs " + std::to_string(expected));
      view.bytes = std::span<const uint8_t>(base_ + data_begin + begin, bytes);
      if (bytes > 0) ranges.push_back({static_cast<uint64_t>(begin), static_cast<uint64_t>(end), name});
      tensors_.push_back(std::move(view));
    }
    std::sort(ranges.begin(), ranges.end(),
              [](const Range& a, const Range& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].begin < ranges[i - 1].end)
        fail("tensors " + ranges[i - 1].name + " and " + ranges[i].name +
             " have overlapping data_offsets");
  }

  void read_metadata(const nlohmann::json& m) {
    if (!m.is_object()) fail("__metadata__ is not an object");
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!it.value().is_string()) fail("__metadata__ value of '" + it.key() + "' is not a string");
      metadata_[it.key()] = it.value().get<std::string>();
    }
  }

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

SafetensorsCheckpoint::SafetensorsCheckpoint() = default;
SafetensorsCheckpoint::~SafetensorsCheckpoint() = default;
SafetensorsCheckpoint::SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept = default;
SafetensorsCheckpoint& SafetensorsCheckpoint::operator=(SafetensorsCheckpoint&&) noexcept = default;

SafetensorsCheckpoint SafetensorsCheckpoint::open(const fs::path& path, const FileProgress& on_files) {
  auto report = [&on_files](uint64_t done, uint64_t total) {
    if (on_files) on_files(done, total);
  };
  SafetensorsCheckpoint ckpt;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("checkpoint " + path.string() + ": no such file or directory");

  // Adds every tensor of one file; a name seen before (in another shard) is refused.
  auto add_file = [&ckpt](const fs::path& file) -> SafetensorsFile& {
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(file));
    SafetensorsFile& f = *ckpt.files_.back();
    for (const TensorView& t : f.tensors()) {
      auto [it, inserted] = ckpt.tensors_.emplace(t.name, t);
      if (!inserted)
        throw Error("checkpoint: tensor " + t.name + " appears in both " + it->second.file +
                    " and " + f.path());
    }
    for (const auto& [k, v] : f.metadata()) ckpt.metadata_.emplace(k, v);
    return f;
  };

  if (!fs::is_directory(path)) {
    report(0, 1);
    add_file(path);
    report(1, 1);
    return ckpt;
  }

  const fs::path index_path = path / kIndexName;
  if (fs::exists(index_path)) {
    const std::string index_name = index_path.string();
    const std::string text = read_regular_file(index_path, "shard index");
    nlohmann::json index;
    try {
      index = parse_json_bounded(text);
    } catch (const JsonTextError& e) {
      throw Error(index_name + ": not valid JSON (" + e.what() + ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw Error(index_name + ": has no weight_map object");
    // Shards in the order they are first named, each opened once.
    std::vector<std::string> shards;
    std::map<std::string, std::vector<std::string>> names_by_shard;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        throw Error(index_name + ": weight_map entry of " + it.key() + " is not a file name");
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard == "." || shard == ".." || fs::path(shard).filename() != shard)
        throw Error(index_name + ": weight_map names '" + shard + "' for " + it.key() +
                    ", which is not a plain file name");
      if (!names_by_shard.count(shard)) shards.push_back(shard);
      names_by_shard[shard].push_back(it.key());
    }
    std::sort(shards.begin(), shards.end());
    report(0, shards.size());
    uint64_t opened = 0;
    for (const std::string& shard : shards) {
      const fs::path shard_path = path / shard;
      // The name is untrusted: an over-long one is an error code here, not a filesystem_error.
      std::error_code ec;
      const bool present_on_disk = fs::exists(shard_path, ec);
      if (ec && ec != std::errc::no_such_file_or_directory)
        throw Error(index_name + ": names shard " + shard.substr(0, 80) + (shard.size() > 80 ? "..." : "") +
                    ", which cannot be opened: " + ec.message());
      if (!present_on_disk)
        throw Error(index_name + ": names shard " + shard + " (for tensor " +
                    names_by_shard[shard].front() + "), which does not exist");
      SafetensorsFile& f = add_file(shard_path);
      std::set<std::string> present;
      for (const TensorView& t : f.tensors()) present.insert(t.name);
      for (const std::string& name : names_by_shard[shard])
        if (!present.count(name))
          throw Error(index_name + ": tensor " + name + " is mapped to " + shard +
                      ", which does not hold it");
      report(++opened, shards.size());
    }
    if (index.contains("metadata") && index["metadata"].is_object())
      for (auto it = index["metadata"].begin(); it != index["metadata"].end(); ++it)
        ckpt.metadata_.emplace(it.key(), it.value().is_string() ? it.value().get<std::string>()
                                                                 : it.value().dump());
    return ckpt;
  }

  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path))
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
      files.push_back(entry.path());
  if (files.empty()) throw Error("checkpoint " + path.string() + ": no .safetensors file in it");
  if (files.size() > 1)
    throw Error("checkpoint " + path.string() + ": " + std::to_string(files.size()) +
                " .safetensors files but no " + kIndexName + " to say which tensors they hold");
  report(0, 1);
  add_file(files.front());
  report(1, 1);
  return ckpt;
}

bool SafetensorsCheckpoint::contains(const std::string& name) const {
  return tensors_.count(name) != 0;
}

const TensorView& SafetensorsCheckpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string where = files_.size() == 1 ? files_.front()->path() : "the checkpoint";
    throw Error("tensor " + name + " is missing from " + where);
  }
  return it->second;
}

namespace {

float float_at(const TensorView& t, size_t i) {
  if (t.dtype == DType::F32) {
    float f;
    std::memcpy(&f, t.bytes.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, t.bytes.data() + 2 * i, 2);
  return t.dtype == DType::BF16 ? bf16_to_float(h) : f16_to_float(h);
}

}  // namespace

void SafetensorsCheckpoint::convert_float(const std::string& name, DType to) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("tensor " + name + " is missing from the checkpoint");
  TensorView& t = it->second;
  if (t.dtype == to) return;
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    throw Error("tensor " + name + " has dtype " + std::string(dtype_safetensors_name(t.dtype)) +
                ", expected a float (F32, BF16 or F16)");
  const size_t n = t.bytes.size() / dtype_size(t.dtype);
  std::vector<uint8_t> out(n * dtype_size(to));
  for (size_t i = 0; i < n; ++i) {
    const float f = float_at(t, i);
    if (to == DType::F32) {
      std::memcpy(out.data() + 4 * i, &f, 4);
    } else {
      const uint16_t b = float_to_bf16(f);  // to nearest even
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  converted_.push_back(std::move(out));
  t.dtype = to;
  t.bytes = std::span<const uint8_t>(converted_.back());
}

void SafetensorsCheckpoint::widen_to_f32(const std::string& name) { convert_float(name, DType::F32); }
void SafetensorsCheckpoint::narrow_to_bf16(const std::string& name) { convert_float(name, DType::BF16); }

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) out.push_back(name);
  return out;
}

}  // namespace kplan
