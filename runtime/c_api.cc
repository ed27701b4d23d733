// The C API (runtime/include/kplan/kplan.h) over the plan reader, the GPU model and sessions, the
// CPU reference and the decode loops: every exception becomes a status and a thread-local message.
#include "kplan/kplan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "runtime/c_api_plan.h"
#include "runtime/capped_target.h"
#include "runtime/cpu/weight_table.h"
#include "runtime/ddtree/budget_chooser.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/oracle_drafter.h"
#include "runtime/ddtree/prefill.h"
#include "runtime/ddtree/random_drafter.h"
#include "runtime/gpu/gpu_device.h"
#include "runtime/gpu/gpu_dflash_drafter.h"
#include "runtime/gpu/gpu_target_model.h"
#include "runtime/plan_cpu_target.h"
#include "runtime/plan_print.h"
#include "runtime/plan_stats.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer_bundle.h"
#include "schemas/plan_reader.h"

// A plan's tokenizer, built from its bundle on first use.
class TokenizerCache {
 public:
  const kplan::tokenizer::Tokenizer& get(const kplan::plan::Plan& plan, const std::string& path) {
    std::call_once(once_, [&] {
      const std::vector<uint8_t>& bytes = plan.tokenizer;
      if (!kplan::tokenizer::is_tokenizer_bundle(bytes)) {
        error_ = "no tokenizer: plan '" + path + "' carries no tiktoken data; use --prompt-ids";
        return;
      }
      try {
        tokenizer_ = std::make_unique<kplan::tokenizer::Tokenizer>(kplan::tokenizer::tokenizer_from_bundle(bytes, path));
      } catch (const kplan::Error& e) {
        error_ = e.what();
      }
    });
    if (!tokenizer_) throw kplan::Error(error_);
    return *tokenizer_;
  }

 private:
  std::once_flag once_;
  std::unique_ptr<kplan::tokenizer::Tokenizer> tokenizer_;
  std::string error_;
};

// A plan's chat template (kplan_chat_template_apply), parsed on first use.
class ChatTemplateCache {
 public:
  struct Entry {
    kplan::tokenizer::BundledChatTemplate source;
    std::optional<kplan::tokenizer::ChatTemplate> parsed;
  };
  // The template's source ("" when none); throws a malformed chat_template entry's error.
  const Entry* get(const kplan::plan::Plan& plan, const std::string& path) {
    std::call_once(once_, [&] {
      try {
        if (auto t = kplan::tokenizer::chat_template_from_bundle(plan.tokenizer, path)) {
          entry_.source = std::move(*t);
          const std::string name = path + " (" + entry_.source.origin + ")";
          entry_.parsed = kplan::tokenizer::ChatTemplate::parse(entry_.source.text, name);
          present_ = true;
        }
      } catch (const kplan::Error& e) {
        error_ = e.what();
      }
    });
    if (!error_.empty()) throw kplan::Error(error_);
    return present_ ? &entry_ : nullptr;
  }
  // The source text alone, parsed or not ("" when none or malformed).
  const std::string& text(const kplan::plan::Plan& plan, const std::string& path) {
    std::call_once(text_once_, [&] {
      try {
        if (auto t = kplan::tokenizer::chat_template_from_bundle(plan.tokenizer, path)) text_ = t->text;
      } catch (const kplan::Error&) {
      }
    });
    return text_;
  }

 private:
  std::once_flag once_, text_once_;
  Entry entry_;
  bool present_ = false;
  std::string error_, text_;
};

struct kplan_plan {
  std::shared_ptr<const kplan::plan::Plan> plan;
  std::string path;
  std::string sections[6];
  TokenizerCache tokenizer;
  ChatTemplateCache chat_template;
};

// What a model's sessions share: the plan and, on the GPU, the modules and weights on the device.
struct ModelState {
  std::shared_ptr<const kplan::plan::Plan> plan;
  std::string source;
  std::shared_ptr<const kplan::gpu::GpuModel> gpu;  // null: the CPU reference
  // The CPU reference's weights (fp32 copies made as sessions first read them), shared by
  // every CPU session and drafter of the model.
  std::shared_ptr<const kplan::cpu::WeightTable> cpu_weights;
  double load_seconds = 0;
  std::atomic<int32_t> sessions{0};
  TokenizerCache tokenizer;  // stop strings
};

struct kplan_model {
  std::shared_ptr<ModelState> state;
};

struct kplan_session {
  std::shared_ptr<ModelState> model;
  std::unique_ptr<kplan::TargetModel> target;
  kplan::gpu::GpuTargetModel* gpu = nullptr;  // set when the session runs on the GPU
  double load_seconds = 0;
  kplan::StepOutput last;
  // --budget auto: the chooser that learns this session's acceptance across its generate calls
  // (made on first use, from the step costs the target measured at load).
  std::unique_ptr<kplan::BudgetChooser> chooser;
  ~kplan_session() {
    target.reset();
    if (model) --model->sessions;
  }
};

namespace {

thread_local std::string g_error;

// The plan's DFlash drafter was lowered for the GPU (plans from before that carry its IR only).
bool has_gpu_drafter(const kplan::plan::Plan& p) {
  return p.draft && p.bucket_for("draft", p.draft->block_size) != nullptr;
}

kplan_status fail(kplan_status status, const std::string& message) {
  g_error = message;
  return status;
}

// Runs `body`, turning exceptions into a status; "no GPU: ..." errors become NO_GPU.
template <typename F>
kplan_status guarded(F&& body) {
  try {
    body();
    return KPLAN_STATUS_OK;
  } catch (const kplan::Error& e) {
    std::string m = e.what();
    return fail(m.rfind("no GPU:", 0) == 0 ? KPLAN_STATUS_NO_GPU : KPLAN_STATUS_ERROR, m);
  } catch (const std::bad_alloc&) {
    return fail(KPLAN_STATUS_ERROR, "out of host memory");
  } catch (const std::exception& e) {
    return fail(KPLAN_STATUS_ERROR, std::string("internal error: ") + e.what());
  }
}

// Reads a caller's options struct over `defaults`: only the fields its struct_size covers.
template <typename T>
T read_options(const T* options, T defaults, const char* what) {
  if (!options) return defaults;
  if (options->struct_size < sizeof(uint32_t))
    throw kplan::Error(std::string(what) + ": struct_size is not set (use its _init function)");
  std::memcpy(&defaults, options, std::min<size_t>(options->struct_size, sizeof(T)));
  defaults.struct_size = sizeof(T);
  return defaults;
}

// Writes `full` into a caller's struct, as much of it as its struct_size covers.
template <typename T>
void write_info(T* out, T full, const char* what) {
  const uint32_t size = out->struct_size;
  if (size < sizeof(uint32_t)) throw kplan::Error(std::string(what) + ": struct_size is not set");
  full.struct_size = size;
  std::memcpy(out, &full, std::min<size_t>(size, sizeof(T)));
}

const kplan::tokenizer::Tokenizer& plan_tokenizer(const kplan_plan* plan) {
  auto* p = const_cast<kplan_plan*>(plan);  // the cache is not part of the plan's value
  return p->tokenizer.get(*p->plan, p->path);
}

void copy_text(char* dst, size_t cap, const std::string& s) {
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

}  // namespace

extern "C" {

const char* kplan_error_last(void) { return g_error.c_str(); }

const char* kplan_version(void) { return "0.1.0"; }

kplan_status kplan_plan_open(const char* path, const kplan_plan_open_options* options, kplan_plan** out) {
  return kplan_plan_open_with_progress(path, options, nullptr, nullptr, out);
}

kplan_status kplan_plan_open_with_progress(const char* path, const kplan_plan_open_options* options,
                                           kplan_progress_callback on_progress, void* user_data, kplan_plan** out) {
  if (!path || !out) return fail(KPLAN_STATUS_ERROR, "kplan_plan_open: null argument");
  *out = nullptr;
  return guarded([&] {
    // A directory would reach mmap and fail as "No such device" (issue 11).
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw kplan::Error(std::string("plan '") + path + "' is a directory, not a .kplan file (a checkpoint directory "
                         "runs with `kplan run DIR`; compile one with `kplan compile --model DIR -o model.kplan`)");
    kplan::plan::ReadOptions ro;
    if (options) ro.verify_weights = options->verify_weights != 0;
    if (on_progress)
      ro.on_progress = [on_progress, user_data](uint64_t done, uint64_t total) { on_progress(user_data, done, total); };
    auto h = std::make_unique<kplan_plan>();
    h->path = path;
    h->plan = std::make_shared<const kplan::plan::Plan>(kplan::plan::read_plan(path, ro));
    *out = h.release();
  });
}

}  // extern "C"

// C++ linkage: it takes a C++ plan (runtime/c_api_plan.h).
kplan_status kplan_plan_adopt(std::shared_ptr<const kplan::plan::Plan> plan, const std::string& source,
                              kplan_plan** out) {
  if (!plan || !out) return fail(KPLAN_STATUS_ERROR, "kplan_plan_adopt: null argument");
  *out = nullptr;
  return guarded([&] {
    // A plan without launches (the CPU reference's, made from a checkpoint) has nothing to
    // cross-check; one with launches is validated as a file's would be.
    if (!plan->kernels.empty() || !plan->buckets.empty()) kplan::plan::validate_plan(*plan, source);
    auto h = std::make_unique<kplan_plan>();
    h->path = source;
    h->plan = std::move(plan);
    *out = h.release();
  });
}

extern "C" {

void kplan_plan_close(kplan_plan* plan) { delete plan; }

kplan_status kplan_plan_describe(kplan_plan* plan, kplan_plan_section section, const char** text) {
  if (!plan || !text) return fail(KPLAN_STATUS_ERROR, "kplan_plan_describe: null argument");
  int s = static_cast<int>(section);
  if (s < 0 || s > 5) return fail(KPLAN_STATUS_ERROR, "kplan_plan_describe: unknown section");
  return guarded([&] {
    std::string& cached = plan->sections[s];
    if (cached.empty())
      cached = kplan::plan::describe_plan(*plan->plan, static_cast<kplan::plan::PlanSection>(s));
    *text = cached.c_str();
  });
}

kplan_status kplan_plan_info_get(const kplan_plan* plan, kplan_plan_info* info) {
  if (!plan || !info) return fail(KPLAN_STATUS_ERROR, "kplan_plan_info_get: null argument");
  return guarded([&] {
    const kplan::plan::Plan& p = *plan->plan;
    kplan_plan_info i;
    std::memset(&i, 0, sizeof i);
    i.format_version = p.header.format_version;
    i.vocab_size = p.model.vocab_size;
    i.hidden_size = p.model.hidden_size;
    i.num_layers = p.model.num_hidden_layers;
    i.max_tokens_per_step = p.header.limits.max_tokens_per_step;
    i.max_tree_nodes = p.header.limits.max_tree_nodes;
    i.max_context = p.header.limits.max_context;
    kplan::PlanTraffic t = kplan::plan_traffic(p, p.model);
    i.weight_bytes = t.weight_bytes;
    i.decode_read_bytes = t.decode_weight_bytes;
    i.kv_bytes_per_token = t.kv_bytes_per_token;
    i.num_archs = static_cast<int32_t>(std::min<size_t>(8, p.header.archs.size()));
    for (int a = 0; a < i.num_archs; ++a) copy_text(i.archs[a], sizeof i.archs[a], p.header.archs[a]);
    i.has_drafter = p.draft ? 1 : 0;
    i.draft_block_size = p.draft ? static_cast<int32_t>(p.draft->block_size) : 0;
    i.has_tokenizer = kplan::tokenizer::is_tokenizer_bundle(p.tokenizer) ? 1 : 0;
    write_info(info, i, "kplan_plan_info_get");
  });
}

const char* kplan_plan_config_json(const kplan_plan* plan) {
  return plan ? plan->plan->model_config_json.c_str() : "";
}

const uint8_t* kplan_plan_tokenizer(const kplan_plan* plan, uint64_t* size) {
  if (size) *size = plan ? plan->plan->tokenizer.size() : 0;
  return plan ? plan->plan->tokenizer.data() : nullptr;
}

const char* kplan_plan_draft_config_json(const kplan_plan* plan) {
  return plan ? plan->plan->draft_config_json.c_str() : "";
}

int32_t kplan_plan_eos_ids_get(const kplan_plan* plan, int64_t* ids, int32_t capacity) {
  if (!plan) return 0;
  const std::vector<int64_t>& eos = plan->plan->model.eos_token_ids;
  for (int32_t i = 0; i < capacity && ids && i < static_cast<int32_t>(eos.size()); ++i) ids[i] = eos[static_cast<size_t>(i)];
  return static_cast<int32_t>(eos.size());
}

kplan_status kplan_device_probe(kplan_device_info* info) {
  if (!info) return fail(KPLAN_STATUS_ERROR, "kplan_device_probe: null argument");
  return guarded([&] {
    kplan::gpu::DeviceInfo d;
    std::string why;
    if (!kplan::gpu::probe_device(&d, &why)) throw kplan::Error(why);
    std::memset(info, 0, sizeof *info);
    copy_text(info->name, sizeof info->name, d.name);
    copy_text(info->arch, sizeof info->arch, d.arch);
    info->sm_count = d.sm_count;
    info->memory_bytes = d.memory_bytes;
    info->driver_version = d.driver_version;
  });
}

void kplan_model_options_init(kplan_model_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->device = KPLAN_DEVICE_AUTO;
}

kplan_status kplan_model_create(kplan_plan* plan, const kplan_model_options* options, kplan_model** out) {
  return kplan_model_create_with_progress(plan, options, nullptr, nullptr, out);
}

kplan_status kplan_model_create_with_progress(kplan_plan* plan, const kplan_model_options* options,
                                              kplan_progress_callback on_progress, void* user_data,
                                              kplan_model** out) {
  if (!plan || !out) return fail(KPLAN_STATUS_ERROR, "kplan_model_create: null argument");
  *out = nullptr;
  return guarded([&] {
    kplan_model_options defaults;
    kplan_model_options_init(&defaults);
    const kplan_model_options opt = read_options(options, defaults, "kplan_model_create");
    if (opt.device < KPLAN_DEVICE_AUTO || opt.device > KPLAN_DEVICE_CPU)
      throw kplan::Error("kplan_model_create: unknown device kind " + std::to_string(opt.device));
    auto state = std::make_shared<ModelState>();
    state->plan = plan->plan;
    state->source = plan->path;
    auto start = std::chrono::steady_clock::now();
    bool gpu = opt.device == KPLAN_DEVICE_GPU;
    // AUTO: the GPU when one is usable and the plan has kernels at all (a kernel-less plan, e.g.
    // a checkpoint directory's reference plan, is for the CPU reference).
    if (opt.device == KPLAN_DEVICE_AUTO && !plan->plan->header.archs.empty()) {
      kplan::gpu::DeviceInfo d;
      gpu = kplan::gpu::probe_device(&d, nullptr);
    }
    if (gpu) {
      // The weights' upload inside GpuModel's constructor reports each 64 MiB chunk copied.
      kplan::gpu::GpuModel::UploadProgress on_upload;
      if (on_progress)
        on_upload = [on_progress, user_data](uint64_t done, uint64_t total) {
          if (total > 0) on_progress(user_data, done, total);
        };
      state->gpu = std::make_shared<const kplan::gpu::GpuModel>(plan->plan, plan->path, on_upload);
    }
    state->cpu_weights = std::make_shared<const kplan::cpu::WeightTable>(plan->plan->weights, plan->path);
    state->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *out = new kplan_model{std::move(state)};
  });
}

void kplan_model_destroy(kplan_model* model) { delete model; }

kplan_status kplan_model_info_get(const kplan_model* model, kplan_model_info* info) {
  if (!model || !info) return fail(KPLAN_STATUS_ERROR, "kplan_model_info_get: null argument");
  return guarded([&] {
    const ModelState& m = *model->state;
    kplan_model_info i;
    std::memset(&i, 0, sizeof i);
    i.device = m.gpu ? KPLAN_DEVICE_GPU : KPLAN_DEVICE_CPU;
    i.sessions = m.sessions.load();
    if (m.gpu) {
      i.weight_uploads = m.gpu->weight_uploads();
      i.weight_upload_bytes = m.gpu->weight_upload_bytes();
      i.device_weight_bytes = m.gpu->weight_bytes();
      for (const kplan::plan::Bucket& b : m.plan->buckets)
        if (b.program == "target") i.max_step_tokens = std::max<int64_t>(i.max_step_tokens, b.tokens);
      uint64_t free_bytes = 0, total_bytes = 0;
      kplan::gpu::device_memory(&free_bytes, &total_bytes);
      i.device_memory_used = total_bytes - free_bytes;
    } else if (m.cpu_weights->tensors_read() > 0) {
      i.weight_uploads = 1;  // one fp32 copy in host memory, however many sessions read it
      i.weight_upload_bytes = m.cpu_weights->bytes_read();
    }
    i.load_seconds = m.load_seconds;
    write_info(info, i, "kplan_model_info_get");
  });
}

void kplan_session_options_init(kplan_session_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->use_graphs = 1;
}

kplan_status kplan_session_create(kplan_model* model, const kplan_session_options* options, kplan_session** out) {
  if (!model || !out) return fail(KPLAN_STATUS_ERROR, "kplan_session_create: null argument");
  *out = nullptr;
  return guarded([&] {
    kplan_session_options defaults;
    kplan_session_options_init(&defaults);
    const kplan_session_options opt = read_options(options, defaults, "kplan_session_create");
    if (opt.max_context < 0 || opt.max_step_tokens < 0)
      throw kplan::Error("kplan_session_create: max_context and max_step_tokens must not be negative");
    auto s = std::make_unique<kplan_session>();
    const ModelState& m = *model->state;
    auto start = std::chrono::steady_clock::now();
    if (m.gpu) {
      kplan::gpu::GpuExecutor::Options go;
      go.use_graphs = opt.use_graphs != 0;
      auto t = std::make_unique<kplan::gpu::GpuTargetModel>(m.gpu, go);
      s->gpu = t.get();
      s->target = std::move(t);
    } else {
      s->target = kplan::make_plan_cpu_target(m.plan, m.source, opt.max_context, m.cpu_weights);
    }
    if (opt.max_step_tokens > 0) s->target = std::make_unique<kplan::CappedTarget>(std::move(s->target), opt.max_step_tokens);
    // --budget auto's cost model is calibrated at load: each step size timed on the device once,
    // before any decode (the replays only write pending rows); the target keeps the figures.
    if (m.gpu && m.plan->draft) s->target->step_costs();
    // The plan's GPU drafter runs its context step and commit in the target's graphs: capture
    // those now rather than in the first timed decode.
    if (s->gpu && has_gpu_drafter(*m.plan)) {
      s->gpu->prepare_followers("draft_context", "draft_commit");
      kplan::gpu::GpuDeviceRounds::prepare_all(*s->gpu);  // and the whole-round graphs
    }
    s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s->model = model->state;
    ++s->model->sessions;
    *out = s.release();
  });
}

void kplan_session_destroy(kplan_session* session) { delete session; }

kplan_device_kind kplan_session_device(const kplan_session* session) {
  return session && session->gpu ? KPLAN_DEVICE_GPU : KPLAN_DEVICE_CPU;
}

double kplan_session_load_seconds(const kplan_session* session) { return session ? session->load_seconds : 0; }

int64_t kplan_session_max_step_tokens(const kplan_session* session) {
  return session ? session->target->max_step_tokens() : 0;
}

kplan_status kplan_session_step(kplan_session* session, const int32_t* tokens, const int32_t* positions, int32_t n,
                                const uint32_t* tree_mask, float* logits) {
  if (!session || !tokens || !positions || n <= 0)
    return fail(KPLAN_STATUS_ERROR, "kplan_session_step: needs a session and at least one token with its position");
  return guarded([&] {
    kplan::StepInput in;
    in.tokens.assign(tokens, tokens + n);
    in.positions.assign(positions, positions + n);
    if (tree_mask) in.tree_mask.assign(tree_mask, tree_mask + static_cast<size_t>(n) * ((n + 31) / 32));
    session->last = session->target->forward(in);
    if (logits) std::memcpy(logits, session->last.logits.data.data(), session->last.logits.data.size() * sizeof(float));
  });
}

kplan_status kplan_session_commit(kplan_session* session, const int32_t* keep, int32_t n) {
  if (!session || (n > 0 && !keep) || n < 0) return fail(KPLAN_STATUS_ERROR, "kplan_session_commit: bad arguments");
  return guarded([&] { session->target->commit(std::span<const int32_t>(keep, static_cast<size_t>(n))); });
}

int64_t kplan_session_cache_length(const kplan_session* session) { return session ? session->target->cache_length() : 0; }

int64_t kplan_session_max_context(const kplan_session* session) { return session ? session->target->max_context() : 0; }

kplan_status kplan_session_reset(kplan_session* session) {
  if (!session) return fail(KPLAN_STATUS_ERROR, "kplan_session_reset: null session");
  return guarded([&] { session->target->reset(); });
}

kplan_status kplan_session_capture_layers_set(kplan_session* session, const int64_t* layers, int32_t n) {
  if (!session || (n > 0 && !layers) || n < 0)
    return fail(KPLAN_STATUS_ERROR, "kplan_session_capture_layers_set: bad arguments");
  return guarded([&] { session->target->set_capture_layers(std::vector<int64_t>(layers, layers + n)); });
}

kplan_status kplan_session_captured(kplan_session* session, int32_t index, float* out, int64_t capacity) {
  if (!session || !out) return fail(KPLAN_STATUS_ERROR, "kplan_session_captured: null argument");
  return guarded([&] {
    if (index < 0 || static_cast<size_t>(index) >= session->last.captured.size())
      throw kplan::Error("capture index " + std::to_string(index) + " out of range (" +
                         std::to_string(session->last.captured.size()) + " captured layers)");
    const kplan::Matrix& m = session->last.captured[static_cast<size_t>(index)];
    if (capacity < static_cast<int64_t>(m.data.size()))
      throw kplan::Error("kplan_session_captured: the output holds " + std::to_string(capacity) + " floats, " +
                         std::to_string(m.data.size()) + " needed");
    std::memcpy(out, m.data.data(), m.data.size() * sizeof(float));
  });
}

void kplan_generate_options_init(kplan_generate_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->spec = KPLAN_SPEC_NONE;
  options->drafter = KPLAN_DRAFTER_DFLASH;
  options->budget = 16;
  options->max_new = 16;
  options->stop_at_eos = 1;
  options->oracle_accuracy = 0.8;
  options->top_p = 1.0;
  options->repetition_penalty = 1.0;
}

namespace {

// The drafter a generate call asks for (null for AR).
std::unique_ptr<kplan::Drafter> make_drafter(kplan_session& s, const kplan_generate_options& o,
                                             std::span<const int32_t> prompt, const kplan::DecodeOptions& decode) {
  if (o.spec == KPLAN_SPEC_NONE) return nullptr;
  const kplan::plan::Plan& p = *s.model->plan;
  const std::string mode = o.spec == KPLAN_SPEC_DFLASH ? "dflash" : "ddtree";
  if (o.drafter == KPLAN_DRAFTER_DFLASH) {
    if (!p.draft)
      throw kplan::Error("speculative decoding (" + mode + ") needs a drafter: the plan has no DFlash drafter "
                         "(compile it with --draft DIR), or use the oracle or random drafter");
    // On the GPU the drafter runs in the target's session when the plan lowered it there.
    if (s.gpu && has_gpu_drafter(p)) return std::make_unique<kplan::gpu::GpuDFlashDrafter>(*s.gpu);
    return kplan::make_plan_cpu_drafter(s.model->plan, s.model->source, s.model->cpu_weights);
  }
  if (o.draft_depth < 0) throw kplan::Error("the draft depth must not be negative");
  // A depth is bounded by what a round can verify: the drafter's block (it proposes block_size - 1
  // positions), else the context (issue 12: a depth of 10^6 ran until killed).
  if (p.draft && o.draft_depth > p.draft->block_size - 1)
    throw kplan::Error("the draft depth " + std::to_string(o.draft_depth) + " is past the drafter's block (block_size " +
                       std::to_string(p.draft->block_size) + " proposes at most " + std::to_string(p.draft->block_size - 1) +
                       " positions)");
  if (o.draft_depth > s.target->max_context())
    throw kplan::Error("the draft depth " + std::to_string(o.draft_depth) + " is past the context (" +
                       std::to_string(s.target->max_context()) + " positions)");
  // As deep as the plan's DFlash drafter would propose (its block size - 1), else 7 (block size 8).
  int64_t depth = o.draft_depth;
  if (depth == 0 && p.draft) depth = p.draft->block_size - 1;
  if (depth <= 0) depth = 7;
  const int64_t vocab = p.model.vocab_size;
  if (o.drafter == KPLAN_DRAFTER_RANDOM) return std::make_unique<kplan::RandomDrafter>(vocab, depth, o.seed);
  if (o.oracle_accuracy < 0 || o.oracle_accuracy > 1) throw kplan::Error("the oracle accuracy must be within [0, 1]");
  // The oracle is told the true continuation: given, or AR decoding with the same settings first
  // (greedy, or sampled with the same seed: the speculative walk draws the same samples).
  std::vector<int32_t> truth(prompt.begin(), prompt.end());
  if (o.oracle_continuation) {
    if (o.oracle_continuation_length < 0) throw kplan::Error("the oracle continuation length must not be negative");
    truth.insert(truth.end(), o.oracle_continuation, o.oracle_continuation + o.oracle_continuation_length);
  } else {
    kplan::DecodeOptions ar = decode;
    ar.spec = kplan::SpecMode::kNone;
    ar.on_token = nullptr;  // the reference run is not the caller's output
    const kplan::DecodeResult reference = kplan::decode(*s.target, nullptr, prompt, ar);
    truth.insert(truth.end(), reference.tokens.begin(), reference.tokens.end());
  }
  return std::make_unique<kplan::OracleDrafter>(std::move(truth), vocab, depth, o.oracle_accuracy, o.seed);
}

kplan_generate_stats to_c(const kplan::DecodeStats& d) {
  kplan_generate_stats c;
  std::memset(&c, 0, sizeof c);
  c.prompt_tokens = d.prompt_tokens;
  c.generated_tokens = d.generated_tokens;
  c.prefill_steps = d.prefill_steps;
  c.rounds = d.rounds;
  c.committed_in_rounds = d.committed_in_rounds;
  c.tree_nodes = d.tree_nodes;
  c.target_forwards = d.target_forwards;
  c.mean_acceptance_length = d.mean_acceptance_length();
  c.stopped_at_context = d.stopped_at_context ? 1 : 0;
  c.seconds_prefill = d.seconds.prefill;
  c.seconds_draft = d.seconds.draft;
  c.seconds_tree_build = d.seconds.tree_build;
  c.seconds_verify = d.seconds.verify;
  c.seconds_walk_commit = d.seconds.walk_commit;
  static_assert(KPLAN_ACCEPTANCE_BINS == kplan::kAcceptanceBins, "the C API's histogram is DecodeStats'");
  std::copy(d.acceptance_histogram.begin(), d.acceptance_histogram.end(), c.acceptance_histogram);
  c.seconds_rounds = d.seconds.rounds;
  c.seconds_device_wait = d.seconds.device_wait;
  c.device_rounds = d.device_rounds ? 1 : 0;
  c.stop_reason = KPLAN_STOP_MAX_NEW;
  if (d.stopped_at_context) c.stop_reason = KPLAN_STOP_CONTEXT;
  return c;
}

}  // namespace

kplan_status kplan_session_generate(kplan_session* session, const int32_t* prompt, int32_t n_prompt,
                                    const kplan_generate_options* options, int32_t* out_tokens, int32_t capacity,
                                    int32_t* n_tokens, kplan_generate_stats* stats) {
  if (!session || (n_prompt > 0 && !prompt) || n_prompt < 0 || !out_tokens || !n_tokens)
    return fail(KPLAN_STATUS_ERROR, "kplan_session_generate: null argument");
  *n_tokens = 0;
  return guarded([&] {
    kplan_generate_options defaults;
    kplan_generate_options_init(&defaults);
    const kplan_generate_options o = read_options(options, defaults, "kplan_session_generate");
    if (o.spec < KPLAN_SPEC_NONE || o.spec > KPLAN_SPEC_DDTREE) throw kplan::Error("unknown speculative mode " + std::to_string(o.spec));
    if (o.drafter < KPLAN_DRAFTER_DFLASH || o.drafter > KPLAN_DRAFTER_RANDOM)
      throw kplan::Error("unknown drafter kind " + std::to_string(o.drafter));
    if (o.max_new < 1) throw kplan::Error("max_new must be at least 1");
    if (capacity < o.max_new)
      throw kplan::Error("kplan_session_generate: out_tokens holds " + std::to_string(capacity) + " tokens, max_new is " +
                         std::to_string(o.max_new));
    if (o.spec == KPLAN_SPEC_DDTREE && o.budget < 1 && o.budget != KPLAN_BUDGET_AUTO)
      throw kplan::Error("the DDTree budget must be at least 1 node (got " + std::to_string(o.budget) + ")");
    // A GPU step runs in one of the plan's buckets: a verify of 1 + budget tokens must fit the
    // largest, which the user can fix at compile time — say so before decoding anything.
    const int64_t largest = session->model->plan->header.limits.max_tokens_per_step;
    if (session->gpu && o.spec == KPLAN_SPEC_DDTREE && o.budget != KPLAN_BUDGET_AUTO && o.budget + int64_t{1} > largest)
      throw kplan::Error("DDTree budget " + std::to_string(o.budget) + " verifies " + std::to_string(o.budget + int64_t{1}) +
                         " tokens a round, more than the plan's largest bucket (" + std::to_string(largest) +
                         " tokens): use --budget " + std::to_string(largest - 1) +
                         " or less, or compile the plan with a --buckets list that reaches " +
                         std::to_string(o.budget + int64_t{1}));
    if (!(o.temperature >= 0) || std::isinf(o.temperature))  // NaN fails the comparison
      throw kplan::Error("the temperature must be a finite number >= 0 (got " + std::to_string(o.temperature) + ")");
    const std::span<const int32_t> ids(prompt, static_cast<size_t>(n_prompt));
    kplan::DecodeOptions d;
    d.spec = o.spec == KPLAN_SPEC_NONE ? kplan::SpecMode::kNone
             : o.spec == KPLAN_SPEC_DFLASH ? kplan::SpecMode::kDFlash : kplan::SpecMode::kDDTree;
    static_assert(KPLAN_BUDGET_AUTO == kplan::kBudgetAuto, "the C API's auto budget is the loop's");
    d.budget = o.budget;
    if (o.spec == KPLAN_SPEC_DDTREE && o.budget == KPLAN_BUDGET_AUTO) {
      if (!session->chooser)
        session->chooser = std::make_unique<kplan::BudgetChooser>(kplan::BudgetChooser::for_step_costs(session->target->step_costs()));
      d.budget_chooser = session->chooser.get();
    }
    d.max_new = o.max_new;
    // KPLAN_DEVICE_ROUNDS=0: the host runs each round's steps (to compare the two).
    const char* device_rounds = std::getenv("KPLAN_DEVICE_ROUNDS");
    d.device_rounds = !(device_rounds && std::string(device_rounds) == "0");
    d.temperature = o.temperature;
    d.seed = o.seed;
    d.sampling.top_k = o.top_k;
    d.sampling.top_p = o.top_p;
    d.sampling.min_p = o.min_p;
    d.sampling.repetition_penalty = o.repetition_penalty;
    d.sampling.frequency_penalty = o.frequency_penalty;
    d.sampling.presence_penalty = o.presence_penalty;
    kplan::validate_sampling(d.sampling, "kplan_generate_options.");
    if (o.stop_at_eos) d.eos_ids = session->model->plan->model.eos_token_ids;
    // Stop strings: the output's text grows by each token's bytes (a tiktoken decode is the
    // concatenation of its tokens' bytes), searched where a match could end.
    if (o.n_stop_strings < 0 || (o.n_stop_strings > 0 && !o.stop_strings))
      throw kplan::Error("kplan_generate_options.stop_strings: " + std::to_string(o.n_stop_strings) + " strings, " +
                         (o.stop_strings ? "a negative count" : "and a null array"));
    std::vector<std::string> stops;
    for (int32_t i = 0; i < o.n_stop_strings; ++i) {
      if (!o.stop_strings[i]) throw kplan::Error("kplan_generate_options.stop_strings[" + std::to_string(i) + "] is null");
      if (!*o.stop_strings[i]) throw kplan::Error("kplan_generate_options.stop_strings[" + std::to_string(i) + "] is empty");
      stops.emplace_back(o.stop_strings[i]);
    }
    const kplan::tokenizer::Tokenizer* tokenizer = stops.empty() ? nullptr : &session->model->tokenizer.get(*session->model->plan, session->model->source);
    std::string text;
    bool matched_stop = false, callback_stopped = false;
    if (!stops.empty() || o.on_token) {
      d.on_token = [&](int32_t token) {
        if (o.on_token && o.on_token(o.on_token_user_data, token) != 0) callback_stopped = true;
        if (tokenizer) {
          const size_t before = text.size();
          text += tokenizer->decode(std::span<const int32_t>(&token, 1));
          for (const std::string& stop : stops) {
            const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
            if (text.find(stop, from) != std::string::npos) matched_stop = true;
          }
        }
        return !(matched_stop || callback_stopped);
      };
    }
    kplan::TargetModel& target = *session->target;
    kplan::check_prompt(target, ids);  // before the oracle's reference run or a drafter load
    std::unique_ptr<kplan::Drafter> drafter = make_drafter(*session, o, ids, d);
    const kplan::DecodeResult r = kplan::decode(target, drafter.get(), ids, d);
    std::copy(r.tokens.begin(), r.tokens.end(), out_tokens);
    *n_tokens = static_cast<int32_t>(r.tokens.size());
    if (stats) {
      kplan_generate_stats c = to_c(r.stats);
      const bool ended_at_eos = o.stop_at_eos && !r.tokens.empty() &&
                                std::find(d.eos_ids.begin(), d.eos_ids.end(), r.tokens.back()) != d.eos_ids.end();
      if (matched_stop) c.stop_reason = KPLAN_STOP_STRING;
      else if (callback_stopped) c.stop_reason = KPLAN_STOP_CALLBACK;
      else if (ended_at_eos) c.stop_reason = KPLAN_STOP_EOS;
      write_info(stats, c, "kplan_session_generate (stats)");
    }
  });
}

kplan_status kplan_session_generate_greedy(kplan_session* session, const int32_t* prompt, int32_t n_prompt,
                                           int32_t n_new, int32_t* out_ids) {
  if (!session || !prompt || n_prompt <= 0 || n_new < 0 || (n_new > 0 && !out_ids))
    return fail(KPLAN_STATUS_ERROR, "kplan_session_generate_greedy: bad arguments");
  if (n_new == 0) return KPLAN_STATUS_OK;
  kplan_generate_options o;
  kplan_generate_options_init(&o);
  o.max_new = n_new;
  o.stop_at_eos = 0;
  int32_t n = 0;
  return kplan_session_generate(session, prompt, n_prompt, &o, out_ids, n_new, &n, nullptr);
}

kplan_status kplan_tokenizer_encode(const kplan_plan* plan, const char* text, size_t length, int32_t* ids,
                                    int32_t capacity, int32_t* n_ids) {
  if (!plan || (!text && length > 0) || !n_ids || (capacity > 0 && !ids) || capacity < 0)
    return fail(KPLAN_STATUS_ERROR, "kplan_tokenizer_encode: bad arguments");
  *n_ids = 0;
  return guarded([&] {
    const std::vector<int32_t> out = plan_tokenizer(plan).encode(std::string_view(text ? text : "", length));
    *n_ids = static_cast<int32_t>(out.size());
    if (static_cast<int64_t>(out.size()) > capacity)
      throw kplan::Error("kplan_tokenizer_encode: the text has " + std::to_string(out.size()) + " tokens, room for " +
                         std::to_string(capacity));
    std::copy(out.begin(), out.end(), ids);
  });
}

kplan_status kplan_tokenizer_decode(const kplan_plan* plan, const int32_t* ids, int32_t n_ids, char* text,
                                    size_t capacity, size_t* length) {
  if (!plan || (n_ids > 0 && !ids) || n_ids < 0 || !length || (capacity > 0 && !text))
    return fail(KPLAN_STATUS_ERROR, "kplan_tokenizer_decode: bad arguments");
  *length = 0;
  return guarded([&] {
    const std::string out = plan_tokenizer(plan).decode(std::span<const int32_t>(ids, static_cast<size_t>(n_ids)));
    *length = out.size();
    if (out.size() > capacity)
      throw kplan::Error("kplan_tokenizer_decode: the text has " + std::to_string(out.size()) + " bytes, room for " +
                         std::to_string(capacity));
    std::memcpy(text, out.data(), out.size());
  });
}

const char* kplan_plan_chat_template(const kplan_plan* plan) {
  if (!plan) return "";
  auto* p = const_cast<kplan_plan*>(plan);  // the cache is not part of the plan's value
  return p->chat_template.text(*p->plan, p->path).c_str();
}

kplan_status kplan_chat_template_apply(const kplan_plan* plan, const char* conversation_json,
                                       int32_t add_generation_prompt, char* text, size_t capacity, size_t* length) {
  if (!plan || !conversation_json || !length || (capacity > 0 && !text))
    return fail(KPLAN_STATUS_ERROR, "kplan_chat_template_apply: bad arguments");
  *length = 0;
  return guarded([&] {
    auto* p = const_cast<kplan_plan*>(plan);
    const ChatTemplateCache::Entry* t = p->chat_template.get(*p->plan, p->path);
    if (!t)
      throw kplan::Error(
          "no chat template: '" + p->path + "' carries none (" +
          (kplan::tokenizer::is_tokenizer_bundle(p->plan->tokenizer)
               ? std::string("its checkpoint had no chat_template.jinja and no chat_template in tokenizer_config.json")
               : std::string("it carries no tokenizer files, where a chat template lives")) +
          "); write the prompt yourself");
    using Json = nlohmann::ordered_json;
    Json conv = Json::parse(conversation_json, nullptr, /*allow_exceptions=*/false);
    if (conv.is_discarded()) throw kplan::Error("conversation: not valid JSON");
    Json vars = Json::object();
    if (conv.is_object()) {
      if (!conv.contains("messages")) throw kplan::Error("conversation: an object needs a \"messages\" list");
      vars = conv;
    } else if (conv.is_array()) {
      vars["messages"] = conv;
    } else {
      throw kplan::Error("conversation: must be a JSON array of messages or an object with \"messages\"");
    }
    const Json& messages = vars["messages"];
    if (!messages.is_array()) throw kplan::Error("messages: must be a list of message objects");
    for (size_t i = 0; i < messages.size(); ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      const Json& m = messages[i];
      if (!m.is_object()) throw kplan::Error(at + ": must be an object with \"role\" and \"content\"");
      if (!m.contains("role") || !m["role"].is_string()) throw kplan::Error(at + ".role: must be a string");
      if (m.contains("content") && !(m["content"].is_string() || m["content"].is_null() || m["content"].is_array()))
        throw kplan::Error(at + ".content: must be a string, null or a list of parts");
    }
    vars["add_generation_prompt"] = add_generation_prompt != 0;
    if (!vars.contains("bos_token")) vars["bos_token"] = t->source.bos_token;
    if (!vars.contains("eos_token")) vars["eos_token"] = t->source.eos_token;
    const std::string out = t->parsed->render(vars);
    *length = out.size();
    if (out.size() > capacity)
      throw kplan::Error("kplan_chat_template_apply: the text has " + std::to_string(out.size()) + " bytes, room for " +
                         std::to_string(capacity));
    std::memcpy(text, out.data(), out.size());
    if (capacity > out.size()) text[out.size()] = '\0';
  });
}

int32_t kplan_plan_buckets_get(const kplan_plan* plan, int32_t* tokens, int32_t capacity) {
  if (!plan) return 0;
  std::vector<int32_t> t;
  for (const kplan::plan::Bucket& b : plan->plan->buckets)
    if (b.program == "target") t.push_back(static_cast<int32_t>(b.tokens));
  std::sort(t.begin(), t.end());
  for (int32_t i = 0; i < capacity && i < static_cast<int32_t>(t.size()); ++i) tokens[i] = t[static_cast<size_t>(i)];
  return static_cast<int32_t>(t.size());
}

}  // extern "C"

namespace {

// A bench step's setup: the bucket of exactly `tokens` target tokens, the KV cache filled to
// `context` positions by a real prefill (token ids cycle the vocab), one real step that writes
// the step inputs (each timed replay then runs the same positions again).
const kplan::plan::Bucket& prepare_bench_step(kplan::gpu::GpuTargetModel& m, const kplan::plan::Plan& p, int32_t tokens,
                                              int64_t context) {
  if (context + tokens > m.max_context())
    throw kplan::Error("bench context " + std::to_string(context) + " leaves no room for a " + std::to_string(tokens) +
                       "-token step in the plan's " + std::to_string(m.max_context()) + " positions");
  const kplan::plan::Bucket* bucket = p.bucket_for("target", tokens);
  if (!bucket || static_cast<int32_t>(bucket->tokens) != tokens)
    throw kplan::Error("the plan has no target bucket of exactly " + std::to_string(tokens) + " tokens");
  m.reset();
  const int64_t vocab = p.model.vocab_size;
  std::vector<int32_t> fill(static_cast<size_t>(context));
  for (int64_t i = 0; i < context; ++i) fill[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7 % vocab);
  if (context > 0) kplan::prefill(m, fill, true);
  kplan::StepInput in;
  for (int32_t i = 0; i < tokens; ++i) {
    in.tokens.push_back(static_cast<int32_t>((1 + 13 * i) % vocab));
    in.positions.push_back(static_cast<int32_t>(context + i));
  }
  m.executor().run(*bucket, m.step_inputs_for(in, *bucket));
  return *bucket;
}

}  // namespace

extern "C" {

kplan_status kplan_session_bench_decode(kplan_session* session, int32_t steps, int64_t context,
                                        kplan_bench_result* out) {
  return kplan_session_bench_step(session, 1, steps, context, out);
}

kplan_status kplan_session_bench_step(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                      kplan_bench_result* out) {
  if (!session || !out || steps <= 0 || context < 0 || tokens <= 0)
    return fail(KPLAN_STATUS_ERROR, "kplan_session_bench_step: bad arguments");
  if (!session->gpu) return fail(KPLAN_STATUS_NO_GPU, "no GPU: benchmarks time the GPU runtime");
  return guarded([&] {
    kplan::gpu::GpuTargetModel& m = *session->gpu;
    const kplan::plan::Plan& p = *session->model->plan;
    const kplan::plan::Bucket& bucket = prepare_bench_step(m, p, tokens, context);
    std::vector<float> ms = m.executor().time_bucket(bucket, 10, steps);
    std::sort(ms.begin(), ms.end());
    // The same step once more, launch by launch: the experts its tokens route to.
    const std::vector<int64_t> experts = m.executor().distinct_routed_experts(bucket, tokens);
    kplan::PlanTraffic t = kplan::plan_traffic(p, p.model);
    std::memset(out, 0, sizeof *out);
    out->tokens = tokens;
    out->steps = steps;
    out->context = context;
    out->step_ms_median = ms[ms.size() / 2];
    out->step_ms_min = ms.front();
    out->step_ms_p90 = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
    out->read_bytes = t.step_weight_bytes(tokens) + static_cast<double>(t.kv_bytes_per_token) * static_cast<double>(context + tokens);
    out->achieved_gbps = out->read_bytes / (out->step_ms_median * 1e-3) / 1e9;
    out->load_seconds = session->model->load_seconds + session->load_seconds;
    out->moe_layers = static_cast<int32_t>(experts.size());
    for (int64_t e : experts) {
      out->routed_experts_mean += static_cast<double>(e) / static_cast<double>(experts.size());
      out->routed_experts_max = std::max(out->routed_experts_max, static_cast<int32_t>(e));
    }
    m.reset();
  });
}

kplan_status kplan_session_bench_kernels(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                         kplan_kernel_time* out, int32_t capacity, int32_t* n_launches) {
  if (!session || !n_launches || steps <= 0 || context < 0 || tokens <= 0 || capacity < 0 || (capacity > 0 && !out))
    return fail(KPLAN_STATUS_ERROR, "kplan_session_bench_kernels: bad arguments");
  if (!session->gpu) return fail(KPLAN_STATUS_NO_GPU, "no GPU: benchmarks time the GPU runtime");
  return guarded([&] {
    kplan::gpu::GpuTargetModel& m = *session->gpu;
    const kplan::plan::Plan& p = *session->model->plan;
    const kplan::plan::Bucket& bucket = prepare_bench_step(m, p, tokens, context);
    const std::vector<float> ms = m.executor().time_launches(bucket, steps);
    // The experts the step's tokens chose: the share of each routed-expert weight it reads.
    const std::vector<int64_t> experts = m.executor().distinct_routed_experts(bucket, tokens);
    double share = -1;
    if (!experts.empty() && p.model.n_routed_experts > 0) {
      share = 0;
      for (int64_t e : experts) share += static_cast<double>(e) / static_cast<double>(experts.size());
      share /= static_cast<double>(p.model.n_routed_experts);
    }
    const std::vector<kplan::LaunchTraffic> traffic = kplan::launch_traffic(p, bucket, context, share);
    *n_launches = static_cast<int32_t>(bucket.launches.size());
    for (int32_t i = 0; i < capacity && i < *n_launches; ++i) {
      const kplan::plan::Launch& l = bucket.launches[static_cast<size_t>(i)];
      const kplan::plan::Kernel& k = p.kernels[l.kernel];
      kplan_kernel_time& o = out[i];
      o.launch = i;
      o.kernel = k.id.c_str();
      o.family = k.family.c_str();
      o.note = l.note.c_str();
      o.ms_median = ms[static_cast<size_t>(i)];
      o.weight_bytes = traffic[static_cast<size_t>(i)].weight_bytes;
      o.activation_bytes = traffic[static_cast<size_t>(i)].activation_bytes;
    }
    m.reset();
  });
}

kplan_status kplan_session_bench_graph_prefixes(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                                double* ms_out, int32_t capacity, int32_t* n_launches) {
  if (!session || !n_launches || steps <= 0 || context < 0 || tokens <= 0 || capacity < 0 || (capacity > 0 && !ms_out))
    return fail(KPLAN_STATUS_ERROR, "kplan_session_bench_graph_prefixes: bad arguments");
  if (!session->gpu) return fail(KPLAN_STATUS_NO_GPU, "no GPU: benchmarks time the GPU runtime");
  return guarded([&] {
    kplan::gpu::GpuTargetModel& m = *session->gpu;
    const kplan::plan::Plan& p = *session->model->plan;
    const kplan::plan::Bucket& bucket = prepare_bench_step(m, p, tokens, context);
    const std::vector<float> ms = m.executor().time_graph_prefixes(bucket, steps);
    *n_launches = static_cast<int32_t>(ms.size());
    for (int32_t i = 0; i < capacity && i < *n_launches; ++i) ms_out[i] = ms[static_cast<size_t>(i)];
    m.reset();
  });
}

}  // extern "C"
