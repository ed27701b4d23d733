// The DFlash drafter's config.json as `kplan compile --draft DIR` reads it (load_draft_config,
// both published layouts), with a mask_token resolved through a small special-token table, then
// what compile does with it: the YaRN amplitude choice, the fit against a target (the tiny
// preset), the drafter's tensor list, and the round trips to config.json and the plan's DraftSpec
// table, which must give the same config again.
#include <flatbuffers/flatbuffers.h>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/synth/presets.h"
#include "schemas/model_spec_table.h"
#include "tests/fuzz/fuzz_support.h"

#include <nlohmann/json.hpp>

using namespace kplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ModelConfig target = preset_config("tiny");
  static const SpecialTokenLookup tokens{"fuzz specials", [](const std::string& s) -> std::optional<int64_t> {
                                           if (s == "<|MASK|>") return 1000;
                                           if (s == "[EOS]") return 1001;
                                           return std::nullopt;
                                         }};
  const auto path = fuzz::scratch_dir() / "config.json";
  fuzz::write_file(path, fuzz::as_text(data, size));
  fuzz::refuse_cleanly([&] {
    DraftConfig d = load_draft_config(path, tokens);
    select_draft_yarn_amplitude(d, "config");
    const std::vector<TensorSpec> specs = draft_tensor_specs(d);
    if (specs.empty()) fuzz::finding("a drafter config that parses implies no tensors");

    const nlohmann::json j = draft_config_to_json(d);
    DraftConfig again;
    try {
      again = parse_draft_config(j, "round trip", tokens);
    } catch (const Error& e) {
      fuzz::finding(std::string("draft_config_to_json writes a config parse_draft_config refuses: ") + e.what());
    }
    if (draft_config_to_json(again) != j) fuzz::finding("drafter config.json round trip changes the config");

    flatbuffers::FlatBufferBuilder b;
    b.Finish(plan::build_draft_spec(b, d));
    const DraftConfig from_table =
        plan::read_draft_spec(*flatbuffers::GetRoot<fb::DraftSpec>(b.GetBufferPointer()));
    if (!(from_table == d)) fuzz::finding("the DraftSpec table round trip changes the config");

    check_draft_fits_target(d, target);
  });
  return 0;
}
