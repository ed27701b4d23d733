#include "compiler/frontend/checkpoint.h"

#include <cstring>
#include <set>

#include "compiler/frontend/eos_ids.h"
#include "ir/support/error.h"

namespace kplan {

namespace fs = std::filesystem;

namespace {

constexpr size_t kProblemsShown = 5;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A checkpoint given as a directory or as the config.json inside it.
struct CheckpointPaths {
  fs::path dir;
  fs::path config;
};

CheckpointPaths locate(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path config = path / "config.json";
    if (!fs::exists(config, ec)) throw Error("checkpoint " + path.string() + ": no config.json in it");
    return {path, config};
  }
  if (fs::is_regular_file(path, ec)) return {path.parent_path().empty() ? fs::path(".") : path.parent_path(), path};
  throw Error("checkpoint " + path.string() + ": no such file or directory");
}

// weight_shape holds [out, in] as I32 (what kplan synth writes) or I64 (what torch writes by
// default); returns false when it holds something else.
bool read_shape_pair(const TensorView& t, int64_t* out, int64_t* in) {
  if (t.numel() != 2) return false;
  if (t.dtype == DType::I32 && t.bytes.size() == 8) {
    int32_t v[2];
    std::memcpy(v, t.bytes.data(), 8);
    *out = v[0], *in = v[1];
    return true;
  }
  if (t.dtype == DType::I64 && t.bytes.size() == 16) {
    int64_t v[2];
    std::memcpy(v, t.bytes.data(), 16);
    *out = v[0], *in = v[1];
    return true;
  }
  return false;
}

}  // namespace

// Floats stored in another float dtype than kplan computes with, converted before the dtype
// check so every later reader sees the spec's: a tensor whose spec takes any float
// (widen_floats: the router bias) stored as bf16 / f16 is widened to f32; a bf16 weight stored as
// f32 / f16 (save_pretrained in float32) is rounded to bf16, the precision the kernels read.
void convert_stored_floats(SafetensorsCheckpoint& tensors, const std::vector<TensorSpec>& specs) {
  for (const TensorSpec& s : specs) {
    if (s.role != TensorRole::Plain || !tensors.contains(s.name)) continue;
    const DType d = tensors.get(s.name).dtype;
    if (s.widen_floats && (d == DType::BF16 || d == DType::F16)) tensors.widen_to_f32(s.name);
    if (s.dtype == DType::BF16 && (d == DType::F32 || d == DType::F16)) tensors.narrow_to_bf16(s.name);
  }
}

void validate_checkpoint_tensors(const SafetensorsCheckpoint& tensors, const std::vector<TensorSpec>& specs,
                                 const std::string& where) {
  std::vector<std::string> problems;
  size_t missing = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    if (!tensors.contains(s.name)) {
      ++missing;
      problems.push_back("missing " + s.name);
      continue;
    }
    const TensorView& t = tensors.get(s.name);
    bool dtype_ok = t.dtype == s.dtype ||
                    (s.role == TensorRole::PackedShape && (t.dtype == DType::I32 || t.dtype == DType::I64));
    if (!dtype_ok) {
      problems.push_back(s.name + " has dtype " + std::string(dtype_safetensors_name(t.dtype)) + ", expected " +
                         std::string(dtype_safetensors_name(s.dtype)));
      continue;
    }
    if (t.shape != s.shape) {
      problems.push_back(s.name + " has shape " + shape_text(t.shape) + ", expected " + shape_text(s.shape));
      continue;
    }
    if (s.role == TensorRole::PackedShape) {
      int64_t out = 0, in = 0;
      if (!read_shape_pair(t, &out, &in))
        problems.push_back(s.name + " does not hold two integers [out, in]");
      else if (std::vector<int64_t>{out, in} != s.module_shape)
        problems.push_back(s.name + " holds " + shape_text({out, in}) + ", expected " + shape_text(s.module_shape));
    }
  }
  if (problems.empty()) return;
  std::string msg = where + ": " + std::to_string(problems.size()) + " tensor problem" +
                    (problems.size() == 1 ? "" : "s") + " against config.json";
  if (missing > 0) msg += " (" + std::to_string(missing) + " missing)";
  msg += ": ";
  for (size_t i = 0; i < problems.size() && i < kProblemsShown; ++i) msg += (i ? "; " : "") + problems[i];
  if (problems.size() > kProblemsShown) msg += "; and " + std::to_string(problems.size() - kProblemsShown) + " more";
  throw Error(msg);
}

void refuse_unexpected_tensors(const SafetensorsCheckpoint& tensors, const std::vector<TensorSpec>& specs,
                               const std::string& where) {
  std::set<std::string> expected;
  for (const TensorSpec& s : specs) expected.insert(s.name);
  std::vector<std::string> extra;
  bool own_head = false;
  for (const std::string& name : tensors.names()) {
    if (expected.count(name)) continue;
    extra.push_back(name);
    own_head = own_head || name.find("embed_tokens") != std::string::npos || name.rfind("lm_head", 0) == 0 ||
               name.find(".lm_head") != std::string::npos || name.find("mask_embedding") != std::string::npos;
  }
  if (extra.empty()) return;
  std::string msg = where + ": " + std::to_string(extra.size()) + " tensor" + (extra.size() == 1 ? "" : "s") +
                    " a plain DFlash drafter does not have (";
  msg += own_head ? "an embedding or lm_head of its own is not supported: the drafter uses the target's"
                  : "a DFlash2, quantized or other variant's checkpoint? kplan runs plain DFlash only";
  msg += "): ";
  for (size_t i = 0; i < extra.size() && i < kProblemsShown; ++i) msg += (i ? ", " : "") + extra[i];
  if (extra.size() > kProblemsShown) msg += ", and " + std::to_string(extra.size() - kProblemsShown) + " more";
  throw Error(msg);
}

TargetCheckpoint TargetCheckpoint::open(const fs::path& path, WeightsMode mode, std::optional<int64_t> layers,
                                        const SafetensorsCheckpoint::FileProgress& on_files) {
  CheckpointPaths p = locate(path);
  TargetCheckpoint c;
  c.dir_ = p.dir;
  c.config_ = load_model_config(p.config);
  if (layers) slice_layers(c.config_, *layers);
  c.config_.eos_token_ids = checkpoint_eos_ids(p.dir, c.config_);  // + generation_config.json, tokenizer
  c.specs_ = target_tensor_specs(c.config_);
  if (mode == WeightsMode::Load) {
    c.weights_ = std::make_shared<SafetensorsCheckpoint>(SafetensorsCheckpoint::open(p.dir, on_files));
    convert_stored_floats(*c.weights_, c.specs_);
    validate_checkpoint_tensors(*c.weights_, c.specs_, "checkpoint " + p.dir.string());
  }
  return c;
}

const SafetensorsCheckpoint& TargetCheckpoint::weights() const {
  if (!weights_) throw Error("checkpoint " + dir_.string() + ": opened without weights (--no-weights)");
  return *weights_;
}

DraftCheckpoint DraftCheckpoint::open(const fs::path& path, WeightsMode mode, const DraftOpenOptions& options) {
  CheckpointPaths p = locate(path);
  DraftCheckpoint c;
  c.dir_ = p.dir;
  c.config_ = load_draft_config(p.config, options.tokens);
  select_draft_yarn_amplitude(c.config_, options.yarn_amplitude);
  if (options.context_window < 0)
    throw Error("--draft-context-window " + std::to_string(options.context_window) +
                ": the drafter context window must be >= 0 (0: the whole context)");
  c.config_.context_window = options.context_window;
  c.specs_ = draft_tensor_specs(c.config_);
  if (mode == WeightsMode::Load) {
    c.weights_ = std::make_shared<SafetensorsCheckpoint>(SafetensorsCheckpoint::open(p.dir, options.on_files));
    const std::string where = "drafter checkpoint " + p.dir.string();
    refuse_unexpected_tensors(*c.weights_, c.specs_, where);
    convert_stored_floats(*c.weights_, c.specs_);
    validate_checkpoint_tensors(*c.weights_, c.specs_, where);
  }
  return c;
}

const SafetensorsCheckpoint& DraftCheckpoint::weights() const {
  if (!weights_) throw Error("drafter checkpoint " + dir_.string() + ": opened without weights (--no-weights)");
  return *weights_;
}

}  // namespace kplan
