// The target's config.json as `kplan compile --model DIR` reads it (load_model_config: the file
// checks, the bounded JSON parse, every field), then the tensor list it implies (the sizes of
// every weight, computed from the config's numbers) and the config's round trips: back to
// config.json (model_config_to_json, as `kplan synth` writes it) and through the plan's typed
// ModelSpec table. A config that parses must give the same config again both ways.
#include <flatbuffers/flatbuffers.h>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/tensor_spec.h"
#include "schemas/model_spec_table.h"
#include "tests/fuzz/fuzz_support.h"

#include <nlohmann/json.hpp>

using namespace kplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = fuzz::scratch_dir() / "config.json";
  fuzz::write_file(path, fuzz::as_text(data, size));
  fuzz::refuse_cleanly([&] {
    const ModelConfig c = load_model_config(path);
    const std::vector<TensorSpec> specs = target_tensor_specs(c);
    if (specs.empty()) fuzz::finding("a config that parses implies no tensors");

    const nlohmann::json j = model_config_to_json(c);
    ModelConfig again;
    try {
      again = parse_model_config(j, "round trip");
    } catch (const Error& e) {
      fuzz::finding(std::string("model_config_to_json writes a config parse_model_config refuses: ") + e.what());
    }
    if (model_config_to_json(again) != j) fuzz::finding("config.json round trip changes the config");

    flatbuffers::FlatBufferBuilder b;
    b.Finish(plan::build_model_spec(b, c));
    const ModelConfig from_table =
        plan::read_model_spec(*flatbuffers::GetRoot<fb::ModelSpec>(b.GetBufferPointer()));
    if (!(from_table == c)) fuzz::finding("the ModelSpec table round trip changes the config");
  });
  return 0;
}
