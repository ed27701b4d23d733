#pragma once
// The model spec <-> its FlatBuffer tables (kplan.fbs ModelSpec, DraftSpec), for the plan writer
// and reader: every field of schemas/model_spec.h, typed, so a plan never needs config.json
// parsed again.
#include <flatbuffers/flatbuffers.h>

#include "schemas/kplan_generated.h"
#include "schemas/model_spec.h"

namespace kplan::plan {

flatbuffers::Offset<fb::ModelSpec> build_model_spec(flatbuffers::FlatBufferBuilder& b, const ModelConfig& c);
flatbuffers::Offset<fb::DraftSpec> build_draft_spec(flatbuffers::FlatBufferBuilder& b, const DraftConfig& c);

ModelConfig read_model_spec(const fb::ModelSpec& s);
DraftConfig read_draft_spec(const fb::DraftSpec& s);

}  // namespace kplan::plan
