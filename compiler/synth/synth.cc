#include "compiler/synth/synth.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>

#include "compiler/frontend/int4_pack.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/synth/weight_init.h"
#include "ir/support/error.h"

namespace kplan {

namespace fs = std::filesystem;

namespace {

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  // Little-endian hosts only (x86-64, aarch64): the in-memory layout is the file layout.
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype, const std::string& name) {
  switch (dtype) {
    case DType::F32:
      return as_bytes(values);
    case DType::BF16: {
      std::vector<uint16_t> h(values.size());
      for (size_t i = 0; i < values.size(); ++i) h[i] = float_to_bf16(values[i]);
      return as_bytes(h);
    }
    case DType::F16: {
      std::vector<uint16_t> h(values.size());
      for (size_t i = 0; i < values.size(); ++i) h[i] = float_to_f16(values[i]);
      return as_bytes(h);
    }
    default:
      throw Error("synth: tensor " + name + " has dtype " + std::string(dtype_name(dtype)) +
                  ", which synth cannot fill with random weights");
  }
}

std::string mib(uint64_t bytes) {
  return std::to_string((bytes + (uint64_t{1} << 20) - 1) >> 20) + " MiB";
}

// Produces the bytes of each spec in turn. Packed INT4 parts are quantised from the same fp32
// values an unquantised checkpoint of the same seed holds (stream `<module>.weight`), so
// `--int4` differs from the bf16 checkpoint only by quantisation.
class SpecProducer {
 public:
  SpecProducer(const std::vector<TensorSpec>& specs, uint64_t seed, int64_t group_size)
      : specs_(specs), seed_(seed), group_size_(group_size) {}

  std::vector<uint8_t> operator()(size_t i) {
    const TensorSpec& s = specs_[i];
    if (s.role == TensorRole::Plain) return encode(synth_values(seed_, s.name, s.shape), s.dtype, s.name);
    if (s.module_shape.size() != 2)
      throw Error("synth: packed tensor " + s.name + " does not say its module's [out, in] shape");
    const int64_t out = s.module_shape[0], in = s.module_shape[1];
    if (s.role == TensorRole::PackedShape)
      return as_bytes(std::vector<int32_t>{static_cast<int32_t>(out), static_cast<int32_t>(in)});
    const PackedInt4& p = packed(s.module, out, in);
    return s.role == TensorRole::PackedInt4 ? as_bytes(p.packed) : as_bytes(p.scale);
  }

 private:
  const PackedInt4& packed(const std::string& module, int64_t out, int64_t in) {
    if (cached_module_ != module) {
      cached_ = pack_int4(synth_values(seed_, module + ".weight", {out, in}), out, in, group_size_);
      cached_module_ = module;
    }
    return cached_;
  }

  const std::vector<TensorSpec>& specs_;
  uint64_t seed_;
  int64_t group_size_;
  std::string cached_module_;
  PackedInt4 cached_;
};

// Removes safetensors files a previous synth run may have left, so a directory never mixes
// an old single file with new shards (or the reverse). Only names synth itself writes.
void remove_previous_weights(const fs::path& dir) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors" || name == "model.safetensors.index.json" ||
        std::regex_match(name, shard))
      fs::remove(entry.path());
  }
}

SynthResult write_checkpoint(const std::string& what, const std::vector<TensorSpec>& specs,
                             const nlohmann::json& config_json, const fs::path& out_dir,
                             const SynthOptions& options, int64_t group_size) {
  std::vector<TensorHeader> headers;
  uint64_t total = 0;
  for (const TensorSpec& s : specs) {
    headers.push_back({s.name, s.dtype, s.shape});
    total += headers.back().byte_size();
  }
  if (total > options.max_total_bytes)
    throw Error("synth: the " + what + " checkpoint would be " + mib(total) + ", over the limit of " +
                mib(options.max_total_bytes) + " for synthetic checkpoints");

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir))
    throw Error("synth: cannot create output directory " + out_dir.string());
  remove_previous_weights(out_dir);

  SynthResult result;
  result.weight_bytes = total;
  {
    const fs::path config_path = out_dir / "config.json";
    std::ofstream out(config_path, std::ios::trunc);
    if (!out) throw Error("synth: cannot write " + config_path.string());
    out << config_json.dump(2) << "\n";
    if (!out) throw Error("synth: cannot write " + config_path.string());
    result.files.push_back("config.json");
  }
  SpecProducer spec_producer(specs, options.seed, group_size);
  uint64_t made = 0;
  if (options.on_progress) options.on_progress(0, total);
  auto produce = [&](size_t i) {
    std::vector<uint8_t> bytes = spec_producer(i);
    made += bytes.size();
    if (options.on_progress) options.on_progress(made, total);
    return bytes;
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (options.shard_bytes > 0 && total > options.shard_bytes) {
    for (std::string& name : write_sharded_safetensors_streamed(out_dir, headers, std::ref(produce),
                                                                options.shard_bytes, metadata))
      result.files.push_back(std::move(name));
    result.files.push_back("model.safetensors.index.json");
  } else {
    write_safetensors_streamed(out_dir / "model.safetensors", headers, std::ref(produce), metadata);
    result.files.push_back("model.safetensors");
  }
  return result;
}

}  // namespace

SynthResult synthesize_target(const ModelConfig& config, const fs::path& out_dir,
                              const SynthOptions& options) {
  return write_checkpoint("target", target_tensor_specs(config),
                          options.config_json ? *options.config_json : model_config_to_json(config),
                          out_dir, options, config.quant.group_size);
}

SynthResult synthesize_draft(const DraftConfig& draft, const fs::path& out_dir,
                             const SynthOptions& options) {
  return write_checkpoint("drafter", draft_tensor_specs(draft),
                          options.config_json ? *options.config_json : draft_config_to_json(draft),
                          out_dir, options, 32);
}

}  // namespace kplan
