#include "runtime/plan_cpu_target.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "ir/support/error.h"
#include "runtime/cpu/cpu_backend.h"

namespace kplan {
namespace {

std::optional<TensorData> expert_slice(const std::unordered_map<std::string, const plan::Weight*>& by_name,
                                       const TensorSpec& spec) {
  const std::string marker = ".experts.";
  size_t at = spec.name.find(marker);
  if (at == std::string::npos) return std::nullopt;
  size_t start = at + marker.size();
  size_t end = spec.name.find('.', start);
  if (end == std::string::npos) return std::nullopt;
  int64_t expert = std::stoll(spec.name.substr(start, end - start));
  std::string stacked = spec.name.substr(0, start) + "*" + spec.name.substr(end);
  auto it = by_name.find(stacked);
  if (it == by_name.end()) return std::nullopt;
  const plan::Weight& w = *it->second;
  if (w.shape.empty() || expert >= w.shape[0] || w.data().size() % static_cast<size_t>(w.shape[0]) != 0)
    return std::nullopt;
  size_t each = w.data().size() / static_cast<size_t>(w.shape[0]);
  std::span<const uint8_t> bytes = w.data().subspan(static_cast<size_t>(expert) * each, each);
  return TensorData{spec.name, w.dtype, std::vector<int64_t>(w.shape.begin() + 1, w.shape.end()),
                    std::vector<uint8_t>(bytes.begin(), bytes.end())};
}

std::optional<TensorData> packed_shape(const ModelConfig& config, const TensorSpec& spec) {
  for (const TensorSpec& other : target_tensor_specs(config)) {
    if (other.role != TensorRole::PackedInt4 || other.module != spec.module || other.shape.size() != 2) continue;
    int32_t dims[2] = {static_cast<int32_t>(other.shape[0]), static_cast<int32_t>(other.shape[1] * 8)};
    std::vector<uint8_t> bytes(8);
    std::memcpy(bytes.data(), dims, 8);
    return TensorData{spec.name, DType::I32, {2}, std::move(bytes)};
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<TargetModel> make_plan_cpu_target(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                                  int64_t max_context) {
  ModelConfig config = parse_model_config(nlohmann::json::parse(plan->model_config_json), source + " (model config)");
  std::unordered_map<std::string, const plan::Weight*> by_name;
  for (const plan::Weight& w : plan->weights) by_name[w.name] = &w;
  // The reference loads checkpoint directories; hand it one made of the plan's own tensors. It
  // upcasts everything to fp32 on load, so the directory is removed right after.
  std::vector<TensorData> tensors;
  for (const TensorSpec& spec : target_tensor_specs(config)) {
    auto it = by_name.find(spec.name);
    if (it != by_name.end()) {
      const plan::Weight& w = *it->second;
      std::span<const uint8_t> bytes = w.data();
      tensors.push_back({w.name, w.dtype, w.shape, std::vector<uint8_t>(bytes.begin(), bytes.end())});
      continue;
    }
    // Routed experts may be stacked by the lowering: "...experts.*.gate_proj.weight" [E, ...]
    // holds expert e's tensor as its e-th slice.
    if (spec.role == TensorRole::PackedShape) {
      // compressed-tensors' weight_shape ([out, in], int32) is not needed by the kernels, so a
      // plan may drop it; it follows from the packed weight [out, in/8].
      std::optional<TensorData> shape = packed_shape(config, spec);
      if (shape) {
        tensors.push_back(std::move(*shape));
        continue;
      }
    }
    std::optional<TensorData> slice = expert_slice(by_name, spec);
    if (!slice)
      throw Error(source + ": the plan lacks checkpoint tensor " + spec.name +
                  ", which the CPU reference needs (run it on a GPU, or compile with the original tensors)");
    tensors.push_back(std::move(*slice));
  }
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("kplan_cpu_" + std::to_string(::getpid()) + "_" + std::to_string(reinterpret_cast<uintptr_t>(plan.get())));
  fs::create_directories(dir);
  try {
    std::ofstream(dir / "config.json") << plan->model_config_json;
    write_safetensors(dir / "model.safetensors", tensors);
    tensors.clear();
    std::unique_ptr<TargetModel> model = make_cpu_target(dir, max_context > 0 ? max_context : plan->header.limits.max_context);
    fs::remove_all(dir);
    return model;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
}

}  // namespace kplan
