#pragma once
// Synthetic-weight slices for tests: a config-only directory, `kplan compile --no-weights
// --layers N --synthetic-weights SEED -o` over it through the binary, and the same weights
// written out as a real checkpoint (every tensor's bytes from the plan's synthetic entries,
// experts split out of their stacks), so a test can compare the synthetic plan with a
// checkpoint that holds exactly its values.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/synth/presets.h"
#include "runtime/cpu/synthetic_weights.h"
#include "schemas/plan_reader.h"
#include "tests/unit/kplan_cli.h"

namespace kplan::synthetic_test {

// The tiny preset with K2.6's INT4 routed experts: 4 layers, the first dense.
inline ModelConfig tiny_int4() {
  ModelConfig c = preset_config("tiny");
  c.quant = k26_int4_quant_config();
  return c;
}

// DIR/config.json of `config` (nothing else: the compile reads no tensors).
inline std::filesystem::path config_dir(const ModelConfig& config, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << model_config_to_json(config).dump(2) << "\n";
  return dir;
}

// `kplan compile --model DIR --no-weights --layers N --synthetic-weights SEED -o OUT EXTRA`.
inline test::CliResult compile_slice(const std::filesystem::path& model, int layers, uint64_t seed,
                                     const std::filesystem::path& out, const std::string& extra = "") {
  return test::run_kplan("compile --model " + model.string() + " --no-weights --layers " + std::to_string(layers) +
                             " --synthetic-weights " + std::to_string(seed) + " -o " + out.string() + " " + extra,
                         out.parent_path());
}

// Writes DIR (config.json of `sliced`, model.safetensors) holding the synthetic plan's values
// for every tensor `sliced` names; tensors the plan does not carry (none the IR reads) are zero.
inline void materialize(const plan::Plan& p, const ModelConfig& sliced, const std::filesystem::path& dir) {
  config_dir(sliced, dir);
  std::map<std::string, const plan::Weight*> by_name;
  for (const plan::Weight& w : p.weights)
    if (w.source == "target") by_name[w.name] = &w;
  std::vector<TensorData> tensors;
  for (const TensorSpec& s : target_tensor_specs(sliced)) {
    TensorData t{s.name, s.dtype, s.shape, {}};
    uint64_t bytes = dtype_size(s.dtype);
    for (int64_t d : s.shape) bytes *= static_cast<uint64_t>(d);
    if (s.role == TensorRole::PackedShape) {
      const int32_t v[2] = {static_cast<int32_t>(s.module_shape[0]), static_cast<int32_t>(s.module_shape[1])};
      t.bytes.assign(reinterpret_cast<const uint8_t*>(v), reinterpret_cast<const uint8_t*>(v) + 8);
    } else if (auto it = by_name.find(s.name); it != by_name.end()) {
      t.bytes = cpu::synthetic_bytes(*it->second, 0, plan::synthetic_units(*it->second));
    } else {
      // An expert's tensor: its slice of the stack "...experts.*...".
      const size_t at = s.name.find(".experts.");
      const plan::Weight* stack = nullptr;
      int64_t expert = -1;
      if (at != std::string::npos) {
        const size_t first = at + 9, dot = s.name.find('.', first);
        expert = std::stoll(s.name.substr(first, dot - first));
        auto st = by_name.find(s.name.substr(0, first) + "*" + s.name.substr(dot));
        if (st != by_name.end()) stack = st->second;
      }
      if (stack) {
        const uint64_t each = plan::synthetic_units(*stack) / static_cast<uint64_t>(stack->shape[0]);
        t.bytes = cpu::synthetic_bytes(*stack, static_cast<uint64_t>(expert) * each, each);
      } else {
        t.bytes.assign(bytes, 0);
      }
    }
    EXPECT_EQ(t.bytes.size(), bytes) << s.name;
    tensors.push_back(std::move(t));
  }
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace kplan::synthetic_test
