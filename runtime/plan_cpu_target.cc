#include "runtime/plan_cpu_target.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "ir/error.h"
#include "runtime/cpu/cpu_backend.h"

namespace kplan {

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
    if (it == by_name.end())
      throw Error(source + ": the plan lacks checkpoint tensor " + spec.name +
                  ", which the CPU reference needs (run it on a GPU, or compile with the original tensors)");
    const plan::Weight& w = *it->second;
    std::span<const uint8_t> bytes = w.data();
    tensors.push_back({w.name, w.dtype, w.shape, std::vector<uint8_t>(bytes.begin(), bytes.end())});
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
