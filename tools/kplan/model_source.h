#pragma once
// MODEL as `kplan run` and `kplan bench --acceptance` take it: a compiled .kplan plan (the GPU when
// usable, else the CPU reference over its weights), or a checkpoint directory (+ --draft DIR) that
// the compiler turns into an in-memory reference plan for the CPU. Also the checks both commands
// make of what the plan carries, and the tokenizer through the C API.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/phase.h"

namespace kplan::cli {

struct ModelSource {
  std::string model;      // the MODEL argument: a .kplan file or a checkpoint directory
  std::string draft_dir;  // --draft DIR (checkpoint directories only)
  std::string device = "auto";  // --device auto|cpu|gpu
};

// MODEL and --draft as the user wrote them (paths, HuggingFace cache folders, ORG/NAME in the
// hub cache: hf_cache.h) resolved to paths.
ModelSource resolve_source(const std::string& model, const std::string& draft_dir, const std::string& device);

// Throws kplan::Error naming MODEL when it does not exist, when --draft is given for a plan, or
// when --device gpu is asked of a checkpoint directory. `phase` (may be null) is fed the work's
// counters: a plan's weight bytes hashed, or a checkpoint's safetensors files opened and validated
// (make it with open_phase_unit(source)).
PlanPtr open_model_plan(const ModelSource& source, Phase* phase = nullptr);
// What opening MODEL counts: bytes hashed (a plan) or safetensors files (a checkpoint directory).
ProgressUnit open_phase_unit(const ModelSource& source);
// The phase's text: "reading checkpoint DIR (validating every tensor)" or "opening PLAN
// (verifying its weights' checksums)".
std::string open_phase_text(const ModelSource& source);

kplan_plan_info plan_info(const kplan_plan* plan);
kplan_device_kind device_kind(const std::string& device);  // "auto" | "cpu" | "gpu"

// Throws "no tokenizer: ..." naming MODEL and `instead` (what to give instead of text).
void require_tokenizer(const kplan_plan_info& info, const std::string& model, const std::string& instead);
// Throws "<what> needs a drafter: ..." unless the plan carries one (checked only for the DFlash
// drafter: the oracle and random drafters need none).
void require_drafter(const kplan_plan_info& info, kplan_drafter_kind drafter, const std::string& model,
                     const std::string& what);

std::vector<int32_t> encode_text(const kplan_plan* plan, const std::string& text);
// A conversation (JSON text: a list of messages, or {"messages": [...], ...}) rendered with the
// plan's chat template (kplan_chat_template_apply). Without a template, the error names the files
// looked for: DIR/chat_template.jinja and DIR/tokenizer_config.json's chat_template for a
// checkpoint directory, the plan's carried ones for a plan.
std::string render_chat(const kplan_plan* plan, const std::string& conversation_json, bool add_generation_prompt,
                        const std::string& model);
std::string decode_tokens(const kplan_plan* plan, std::span<const int32_t> tokens);  // raw bytes
// What `kplan run` prints of a decode on stdout: the ids on one line, then `text: ` and their
// decoded bytes when the plan has a tokenizer.
// With `stops`, the text is cut where the first of them begins (the ids are all printed).
void print_tokens(const kplan_plan* plan, const kplan_plan_info& info, std::span<const int32_t> tokens,
                  const std::vector<std::string>& stops = {});

// Where the session runs, for the user: "GPU (NVIDIA H200, sm_90)" or "CPU reference backend"
// (with the reason there is no GPU when --device auto fell back to the CPU for a plan).
std::string describe_device(const kplan_session* session, const ModelSource& source);

}  // namespace kplan::cli
