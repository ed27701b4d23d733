// The C API (runtime/include/kplan/kplan.h) over the plan reader, the GPU executor and the CPU
// reference: every exception becomes a status and a thread-local message.
#include "kplan/kplan.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "runtime/plan_print.h"
#include "schemas/plan_reader.h"
#include "ir/support/error.h"
#include "runtime/gpu/gpu_target_model.h"
#include "runtime/plan_cpu_target.h"
#include "runtime/plan_stats.h"

struct kplan_plan {
  std::shared_ptr<const kplan::plan::Plan> plan;
  std::string path;
  kplan::ModelConfig config;
  std::string sections[6];
};

struct kplan_session {
  kplan_plan* plan = nullptr;
  std::unique_ptr<kplan::TargetModel> model;
  kplan::gpu::GpuTargetModel* gpu = nullptr;  // set when the session runs on the GPU
  double load_seconds = 0;
  kplan::StepOutput last;
};

namespace {

thread_local std::string g_error;

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
  if (!path || !out) return fail(KPLAN_STATUS_ERROR, "kplan_plan_open: null argument");
  *out = nullptr;
  return guarded([&] {
    kplan::plan::ReadOptions ro;
    if (options) ro.verify_weights = options->verify_weights != 0;
    auto h = std::make_unique<kplan_plan>();
    h->path = path;
    h->plan = std::make_shared<const kplan::plan::Plan>(kplan::plan::read_plan(path, ro));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(h->plan->model_config_json);
    } catch (const nlohmann::json::exception& e) {
      throw kplan::Error(h->path + ": damaged plan: the model config is not valid JSON");
    }
    h->config = kplan::parse_model_config(j, h->path + " (model config)");
    *out = h.release();
  });
}

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
    std::memset(info, 0, sizeof *info);
    info->format_version = p.header.format_version;
    info->vocab_size = plan->config.vocab_size;
    info->hidden_size = plan->config.hidden_size;
    info->num_layers = plan->config.num_hidden_layers;
    info->max_tokens_per_step = p.header.limits.max_tokens_per_step;
    info->max_tree_nodes = p.header.limits.max_tree_nodes;
    info->max_context = p.header.limits.max_context;
    kplan::PlanTraffic t = kplan::plan_traffic(p, plan->config);
    info->weight_bytes = t.weight_bytes;
    info->decode_read_bytes = t.decode_weight_bytes;
    info->kv_bytes_per_token = t.kv_bytes_per_token;
    info->num_archs = static_cast<int32_t>(std::min<size_t>(8, p.header.archs.size()));
    for (int i = 0; i < info->num_archs; ++i) copy_text(info->archs[i], sizeof info->archs[i], p.header.archs[i]);
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

kplan_status kplan_session_create(kplan_plan* plan, const kplan_session_options* options, kplan_session** out) {
  if (!plan || !out) return fail(KPLAN_STATUS_ERROR, "kplan_session_create: null argument");
  *out = nullptr;
  kplan_session_options opt{KPLAN_DEVICE_AUTO, 1, 0};
  if (options) opt = *options;
  return guarded([&] {
    auto s = std::make_unique<kplan_session>();
    s->plan = plan;
    auto start = std::chrono::steady_clock::now();
    bool gpu = opt.device == KPLAN_DEVICE_GPU;
    if (opt.device == KPLAN_DEVICE_AUTO) {
      kplan::gpu::DeviceInfo d;
      gpu = kplan::gpu::probe_device(&d, nullptr);
    }
    if (gpu) {
      kplan::gpu::GpuExecutor::Options go;
      go.use_graphs = opt.use_graphs != 0;
      auto m = std::make_unique<kplan::gpu::GpuTargetModel>(plan->plan, plan->path, go);
      s->gpu = m.get();
      s->model = std::move(m);
    } else {
      s->model = kplan::make_plan_cpu_target(plan->plan, plan->path, opt.max_context);
    }
    s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *out = s.release();
  });
}

void kplan_session_destroy(kplan_session* session) { delete session; }

kplan_device_kind kplan_session_device(const kplan_session* session) {
  return session && session->gpu ? KPLAN_DEVICE_GPU : KPLAN_DEVICE_CPU;
}

double kplan_session_load_seconds(const kplan_session* session) { return session ? session->load_seconds : 0; }

kplan_status kplan_session_step(kplan_session* session, const int32_t* tokens, const int32_t* positions, int32_t n,
                                const uint32_t* tree_mask, float* logits) {
  if (!session || !tokens || !positions || n <= 0)
    return fail(KPLAN_STATUS_ERROR, "kplan_session_step: needs a session and at least one token with its position");
  return guarded([&] {
    kplan::StepInput in;
    in.tokens.assign(tokens, tokens + n);
    in.positions.assign(positions, positions + n);
    if (tree_mask) in.tree_mask.assign(tree_mask, tree_mask + static_cast<size_t>(n) * ((n + 31) / 32));
    session->last = session->model->forward(in);
    if (logits) std::memcpy(logits, session->last.logits.data.data(), session->last.logits.data.size() * sizeof(float));
  });
}

kplan_status kplan_session_commit(kplan_session* session, const int32_t* keep, int32_t n) {
  if (!session || (n > 0 && !keep) || n < 0) return fail(KPLAN_STATUS_ERROR, "kplan_session_commit: bad arguments");
  return guarded([&] { session->model->commit(std::span<const int32_t>(keep, static_cast<size_t>(n))); });
}

int64_t kplan_session_cache_length(const kplan_session* session) { return session ? session->model->cache_length() : 0; }

int64_t kplan_session_max_context(const kplan_session* session) { return session ? session->model->max_context() : 0; }

kplan_status kplan_session_reset(kplan_session* session) {
  if (!session) return fail(KPLAN_STATUS_ERROR, "kplan_session_reset: null session");
  return guarded([&] { session->model->reset(); });
}

kplan_status kplan_session_capture_layers_set(kplan_session* session, const int64_t* layers, int32_t n) {
  if (!session || (n > 0 && !layers) || n < 0)
    return fail(KPLAN_STATUS_ERROR, "kplan_session_capture_layers_set: bad arguments");
  return guarded([&] { session->model->set_capture_layers(std::vector<int64_t>(layers, layers + n)); });
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

kplan_status kplan_session_generate_greedy(kplan_session* session, const int32_t* prompt, int32_t n_prompt,
                                           int32_t n_new, int32_t* out_ids) {
  if (!session || !prompt || n_prompt <= 0 || n_new < 0 || (n_new > 0 && !out_ids))
    return fail(KPLAN_STATUS_ERROR, "kplan_session_generate_greedy: bad arguments");
  return guarded([&] {
    kplan::TargetModel& m = *session->model;
    const int64_t chunk = std::max<int64_t>(1, session->plan->plan->header.limits.max_tokens_per_step);
    auto argmax_last = [](const kplan::Matrix& logits) {
      const float* row = logits.row(logits.rows - 1);
      return static_cast<int32_t>(std::max_element(row, row + logits.cols) - row);
    };
    int32_t next = 0;
    for (int64_t start = 0; start < n_prompt; start += chunk) {
      int64_t n = std::min<int64_t>(chunk, n_prompt - start);
      kplan::StepInput in;
      in.tokens.assign(prompt + start, prompt + start + n);
      for (int64_t i = 0; i < n; ++i) in.positions.push_back(static_cast<int32_t>(m.cache_length() + i));
      kplan::StepOutput o = m.forward(in);
      std::vector<int32_t> keep(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) keep[static_cast<size_t>(i)] = static_cast<int32_t>(i);
      m.commit(keep);
      next = argmax_last(o.logits);
    }
    for (int32_t i = 0; i < n_new; ++i) {
      out_ids[i] = next;
      if (i + 1 == n_new) break;
      kplan::StepInput in{{next}, {static_cast<int32_t>(m.cache_length())}, {}};
      kplan::StepOutput o = m.forward(in);
      const int32_t keep0 = 0;
      m.commit(std::span<const int32_t>(&keep0, 1));
      next = argmax_last(o.logits);
    }
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
    const kplan::plan::Plan& p = *session->plan->plan;
    if (context + tokens > m.max_context())
      throw kplan::Error("bench context " + std::to_string(context) + " leaves no room for a " + std::to_string(tokens) +
                         "-token step in the plan's " + std::to_string(m.max_context()) + " positions");
    const kplan::plan::Bucket* bucket = p.bucket_for("target", tokens);
    if (!bucket || static_cast<int32_t>(bucket->tokens) != tokens)
      throw kplan::Error("the plan has no target bucket of exactly " + std::to_string(tokens) + " tokens");
    m.reset();
    // Fill the KV cache to `context` positions with real prefill steps (token ids cycle the vocab).
    const int64_t chunk = std::max<int64_t>(1, p.header.limits.max_tokens_per_step);
    const int64_t vocab = session->plan->config.vocab_size;
    for (int64_t start = 0; start < context; start += chunk) {
      int64_t n = std::min(chunk, context - start);
      kplan::StepInput in;
      for (int64_t i = 0; i < n; ++i) {
        in.tokens.push_back(static_cast<int32_t>((start + i) * 7 % vocab));
        in.positions.push_back(static_cast<int32_t>(start + i));
      }
      m.forward(in);
      std::vector<int32_t> keep(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) keep[static_cast<size_t>(i)] = static_cast<int32_t>(i);
      m.commit(keep);
    }
    kplan::StepInput in;
    for (int32_t i = 0; i < tokens; ++i) {
      in.tokens.push_back(static_cast<int32_t>((1 + 13 * i) % vocab));
      in.positions.push_back(static_cast<int32_t>(context + i));
    }
    // One real step writes the inputs; each replay then runs the same positions again.
    m.executor().run(*bucket, m.step_inputs_for(in, *bucket));
    std::vector<float> ms = m.executor().time_bucket(*bucket, 10, steps);
    std::sort(ms.begin(), ms.end());
    kplan::PlanTraffic t = kplan::plan_traffic(p, session->plan->config);
    std::memset(out, 0, sizeof *out);
    out->tokens = tokens;
    out->steps = steps;
    out->context = context;
    out->step_ms_median = ms[ms.size() / 2];
    out->step_ms_min = ms.front();
    out->step_ms_p90 = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
    out->read_bytes = t.step_weight_bytes(tokens) + static_cast<double>(t.kv_bytes_per_token) * static_cast<double>(context + tokens);
    out->achieved_gbps = out->read_bytes / (out->step_ms_median * 1e-3) / 1e9;
    out->load_seconds = session->load_seconds;
    m.reset();
  });
}

}  // extern "C"
