// MODEL (a plan or a checkpoint directory) to a plan handle; what the plan carries; its tokenizer.
#include "tools/kplan/model_source.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "compiler/driver/reference_plan.h"
#include "ir/support/error.h"
#include "runtime/c_api_plan.h"
#include "tools/kplan/hf_cache.h"

namespace kplan::cli {

namespace fs = std::filesystem;

ModelSource resolve_source(const std::string& model, const std::string& draft_dir, const std::string& device) {
  ModelSource s;
  s.model = resolve_model_argument(model, "MODEL");
  if (!draft_dir.empty()) s.draft_dir = resolve_model_argument(draft_dir, "--draft");
  s.device = device;
  return s;
}

ProgressUnit open_phase_unit(const ModelSource& source) {
  return fs::is_directory(source.model) ? ProgressUnit::count("files") : ProgressUnit::byte_count();
}

std::string open_phase_text(const ModelSource& source) {
  return fs::is_directory(source.model) ? "reading checkpoint " + source.model + " (validating every tensor)"
                                        : "opening " + source.model + " (verifying its weights' checksums)";
}

PlanPtr open_model_plan(const ModelSource& source, Phase* phase) {
  const fs::path model(source.model);
  if (!fs::exists(model)) throw Error("MODEL '" + source.model + "' does not exist");
  if (!fs::is_directory(model)) {
    if (!source.draft_dir.empty())
      throw Error("--draft DIR is for a checkpoint directory; a plan carries its drafter (compile it with --draft)");
    return open_plan(source.model.c_str(), true, phase ? &Phase::progress_callback : nullptr, phase);
  }
  if (source.device == "gpu")
    throw Error("MODEL '" + source.model + "': --device gpu needs a compiled .kplan plan; run a "
                "checkpoint directory with --device cpu");
  ReferencePlanOptions options;
  if (!source.draft_dir.empty()) options.draft = source.draft_dir;
  if (phase) options.on_files = [phase](uint64_t done, uint64_t total) { phase->progress(done, total); };
  kplan_plan* p = nullptr;
  api_check(kplan_plan_adopt(std::make_shared<const plan::Plan>(reference_plan(model, options)), source.model, &p));
  return PlanPtr(p);
}

kplan_plan_info plan_info(const kplan_plan* plan) {
  kplan_plan_info info{};
  info.struct_size = sizeof info;
  api_check(kplan_plan_info_get(plan, &info));
  return info;
}

kplan_device_kind device_kind(const std::string& device) {
  if (device == "gpu") return KPLAN_DEVICE_GPU;
  if (device == "cpu") return KPLAN_DEVICE_CPU;
  return KPLAN_DEVICE_AUTO;  // CLI11 restricts the choices
}

void require_tokenizer(const kplan_plan_info& info, const std::string& model, const std::string& instead) {
  if (info.has_tokenizer) return;
  if (fs::is_directory(model))
    throw Error("no tokenizer: MODEL '" + model + "' has no tiktoken.model + tokenizer_config.json; " + instead);
  throw Error("no tokenizer: plan '" + model + "' carries no tiktoken data; " + instead);
}

std::string render_chat(const kplan_plan* plan, const std::string& conversation_json, bool add_generation_prompt,
                        const std::string& model) {
  const int32_t gen = add_generation_prompt ? 1 : 0;
  size_t length = 0;
  if (kplan_chat_template_apply(plan, conversation_json.c_str(), gen, nullptr, 0, &length) != KPLAN_STATUS_OK &&
      length == 0) {  // a failure other than "room for 0 bytes"
    const std::string message = kplan_error_last();
    if (message.rfind("no chat template:", 0) == 0 && fs::is_directory(model))
      throw Error("no chat template: looked for " + (fs::path(model) / "chat_template.jinja").string() + " and for " +
                  "chat_template in " + (fs::path(model) / "tokenizer_config.json").string() +
                  "; neither is there (give --prompt with the turn markers written out)");
    throw Error(message);
  }
  std::string text(length + 1, '\0');
  api_check(kplan_chat_template_apply(plan, conversation_json.c_str(), gen, text.data(), text.size(), &length));
  text.resize(length);
  return text;
}

void require_drafter(const kplan_plan_info& info, kplan_drafter_kind drafter, const std::string& model,
                     const std::string& what) {
  if (drafter != KPLAN_DRAFTER_DFLASH || info.has_drafter) return;
  throw Error(what + " needs a drafter: " +
              (fs::is_directory(model) ? "give --draft DIR (a DFlash checkpoint)" : "compile the plan with --draft DIR") +
              " or --drafter oracle|random");
}

std::vector<int32_t> encode_text(const kplan_plan* plan, const std::string& text) {
  int32_t n = 0;
  kplan_tokenizer_encode(plan, text.data(), text.size(), nullptr, 0, &n);  // asks the size
  std::vector<int32_t> ids(static_cast<size_t>(n));
  api_check(kplan_tokenizer_encode(plan, text.data(), text.size(), ids.data(), n, &n));
  return ids;
}

std::string decode_tokens(const kplan_plan* plan, std::span<const int32_t> tokens) {
  const auto n = static_cast<int32_t>(tokens.size());
  size_t length = 0;
  kplan_tokenizer_decode(plan, tokens.data(), n, nullptr, 0, &length);  // asks the size
  std::string text(length, '\0');
  api_check(kplan_tokenizer_decode(plan, tokens.data(), n, text.data(), text.size(), &length));
  return text;
}

void print_tokens(const kplan_plan* plan, const kplan_plan_info& info, std::span<const int32_t> tokens,
                  const std::vector<std::string>& stops) {
  std::string line;
  for (size_t i = 0; i < tokens.size(); ++i) line += (i ? " " : "") + std::to_string(tokens[i]);
  std::printf("%s\n", line.c_str());
  if (info.has_tokenizer) {
    std::string text = decode_tokens(plan, tokens);
    size_t cut = std::string::npos;
    for (const std::string& s : stops) cut = std::min(cut, text.find(s));
    if (cut != std::string::npos) text.resize(cut);
    std::fputs("text: ", stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);  // raw bytes, as the model made them
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
}

std::string describe_device(const kplan_session* session, const ModelSource& source) {
  kplan_device_info gpu{};
  const bool has_gpu = kplan_device_probe(&gpu) == KPLAN_STATUS_OK;
  const std::string why_no_gpu = has_gpu ? "" : kplan_error_last();
  if (kplan_session_device(session) == KPLAN_DEVICE_GPU)
    return std::string("GPU (") + gpu.name + ", " + gpu.arch + ")";
  std::string text = "CPU reference backend";
  if (fs::is_directory(source.model)) return text + " (a checkpoint directory; compile a plan for the GPU)";
  if (source.device == "auto" && !has_gpu) text += " (" + why_no_gpu + ")";
  return text;
}

}  // namespace kplan::cli
