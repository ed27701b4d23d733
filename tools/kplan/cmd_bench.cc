// kplan bench: the GPU runtime's measured speed on a plan: plan load time, and the AR decode step
// (graph replay of the 1-token bucket, GPU time by CUDA events, median of --steps replays) with
// the bandwidth it achieves against the bytes the step must read (weights + KV cache).
// `--kernels` adds each launch's time of an AR step and a verify step (--kernel-tokens), grouped by
// kernel instance and family, with the bytes each reads and its share of --hbm-gbps
// (kernel_table.h). `--acceptance PROMPTS` measures the drafter instead (cmd_bench_acceptance.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/bench_acceptance.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/kernel_table.h"
#include "tools/kplan/number_list.h"
#include "tools/kplan/phase.h"

namespace kplan::cli {

namespace {

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

struct BenchArgs {
  std::string plan, json_out;
  int steps = 200;
  int64_t context = 128;
  bool no_graphs = false;
  bool all_buckets = false;
  bool kernels = false;
  bool in_graph = false;
  std::string kernel_tokens = "1,16";
  double hbm_gbps = 4300;
};

// The token counts --kernels times: each a target bucket of the plan, else an error naming it.
std::vector<int32_t> kernel_steps(const BenchArgs& a, kplan_plan* plan) {
  const std::vector<int64_t> asked =
      parse_integer_list(a.kernel_tokens, {"--kernel-tokens", "a token count", "1,16"});
  if (asked.empty()) throw Error("--kernel-tokens: no token count given (give a list like 1,16)");
  int32_t buckets[64];
  const int32_t n = std::min(kplan_plan_buckets_get(plan, buckets, 64), 64);
  std::string have;
  for (int32_t i = 0; i < n; ++i) have += (i ? "," : "") + std::to_string(buckets[i]);
  std::vector<int32_t> out;
  for (int64_t t : asked) {
    if (std::find(buckets, buckets + n, t) == buckets + n)
      throw Error("--kernel-tokens: the plan has no target bucket of " + std::to_string(t) + " tokens (its buckets: " + have + ")");
    out.push_back(static_cast<int32_t>(t));
  }
  return out;
}

void run_bench(const BenchArgs& a) {
  if (a.steps <= 0) throw Error("--steps must be positive");
  if (a.in_graph && !a.kernels) throw Error("--in-graph times the launches of --kernels' steps: give --kernels too");
  if (!(a.hbm_gbps > 0)) throw Error("--hbm-gbps must be a positive bandwidth in GB/s (1e9 bytes), not " + std::to_string(a.hbm_gbps));
  Phase open_phase("kplan bench", "opening " + a.plan + " (verifying its weights' checksums)", false);
  PlanPtr plan = open_plan(a.plan.c_str(), true, &Phase::progress_callback, &open_phase);
  const double open_s = open_phase.done();
  const std::vector<int32_t> kernel_tokens = a.kernels ? kernel_steps(a, plan.get()) : std::vector<int32_t>{};
  kplan_device_info dev{};
  api_check(kplan_device_probe(&dev));
  kplan_plan_info info{};
  info.struct_size = sizeof info;
  api_check(kplan_plan_info_get(plan.get(), &info));
  Phase load_phase("kplan bench", "loading the model (uploading its weights)", false);
  ModelPtr model = create_model(plan.get(), KPLAN_DEVICE_GPU, &Phase::progress_callback, &load_phase);
  load_phase.done();
  kplan_session_options so;
  kplan_session_options_init(&so);
  so.use_graphs = a.no_graphs ? 0 : 1;
  SessionPtr session_ptr = create_session(model.get(), so);
  kplan_session* session = session_ptr.get();
  const int64_t max_context = kplan_session_max_context(session);
  // The decode step itself needs one more position after the cached ones.
  int64_t context = std::max<int64_t>(0, std::min<int64_t>(a.context, max_context - 1));
  kplan_bench_result r{};
  api_check(kplan_session_bench_decode(session, a.steps, context, &r));

  std::printf("device:            %s (%s, %d SMs)\n", dev.name, dev.arch, dev.sm_count);
  std::printf("plan:              %s (%s of weights)\n", a.plan.c_str(), mib(static_cast<double>(info.weight_bytes)).c_str());
  std::printf("plan open:         %.3f s (map + verify checksums)\n", open_s);
  std::printf("session load:      %.3f s (model: cubins, weight upload; session: arena, %s)\n", r.load_seconds,
              a.no_graphs ? "no graphs" : "CUDA graphs");
  std::printf("decode step:       median %.4f ms, min %.4f ms, p90 %.4f ms (%d replays, context %lld)\n",
              r.step_ms_median, r.step_ms_min, r.step_ms_p90, r.steps, static_cast<long long>(r.context));
  std::printf("bytes per step:    %s (decode weights %s + KV %s)\n", mib(r.read_bytes).c_str(),
              mib(static_cast<double>(info.decode_read_bytes)).c_str(),
              mib(r.read_bytes - static_cast<double>(info.decode_read_bytes)).c_str());
  std::printf("achieved:          %.2f GB/s\n", r.achieved_gbps);

  // Every other target bucket (tree verify, prefill chunks): what a step of T tokens costs, the
  // figure a DDTree budget is chosen by.
  nlohmann::json buckets = nlohmann::json::array();
  if (a.all_buckets) {
    int32_t tokens[64];
    int32_t n = std::min(kplan_plan_buckets_get(plan.get(), tokens, 64), 64);
    // Experts: the distinct routed experts the step's tokens chose per MoE layer (mean, max),
    // counted from the device's router outputs: what a tree of that many nodes makes MoE read.
    std::printf("%-8s %12s %14s %12s %12s %18s\n", "tokens", "step ms", "ms per token", "MiB read", "GB/s",
                "experts/layer");
    for (int32_t i = 0; i < n; ++i) {
      kplan_bench_result b{};
      int64_t ctx = std::max<int64_t>(0, std::min<int64_t>(context, max_context - tokens[i]));
      api_check(kplan_session_bench_step(session, tokens[i], a.steps, ctx, &b));
      char experts[48] = "-";
      if (b.moe_layers > 0) std::snprintf(experts, sizeof experts, "%.1f (max %d)", b.routed_experts_mean, b.routed_experts_max);
      std::printf("%-8d %12.4f %14.4f %12.3f %12.2f %18s\n", b.tokens, b.step_ms_median, b.step_ms_median / b.tokens,
                  b.read_bytes / (1024.0 * 1024.0), b.achieved_gbps, experts);
      buckets.push_back({{"tokens", b.tokens},
                         {"context", b.context},
                         {"step_ms_median", b.step_ms_median},
                         {"step_ms_min", b.step_ms_min},
                         {"step_ms_p90", b.step_ms_p90},
                         {"read_bytes", b.read_bytes},
                         {"achieved_gb_per_s", b.achieved_gbps},
                         {"moe_layers", b.moe_layers},
                         {"routed_experts_mean", b.routed_experts_mean},
                         {"routed_experts_max", b.routed_experts_max}});
    }
  }

  // Each launch of the step on its own (events between launches): which kernels miss the floor.
  nlohmann::json kernel_steps_json = nlohmann::json::array();
  for (int32_t t : kernel_tokens) {
    const int64_t ctx = std::max<int64_t>(0, std::min<int64_t>(context, max_context - t));
    int32_t n = 0;
    std::vector<kplan_kernel_time> launches(4096);
    api_check(kplan_session_bench_kernels(session, t, a.steps, ctx, launches.data(), static_cast<int32_t>(launches.size()), &n));
    launches.resize(static_cast<size_t>(std::min<int32_t>(n, static_cast<int32_t>(launches.size()))));
    std::printf("\n%s", kernel_table(t, launches, a.hbm_gbps).c_str());
    std::vector<double> graph_ms;
    if (a.in_graph) {
      graph_ms.assign(launches.size(), 0.0);
      int32_t m = 0;
      api_check(kplan_session_bench_graph_prefixes(session, t, a.steps, ctx, graph_ms.data(), static_cast<int32_t>(graph_ms.size()), &m));
      graph_ms.resize(static_cast<size_t>(std::min<int32_t>(m, static_cast<int32_t>(graph_ms.size()))));
      std::printf("\n%s", graph_marginal_table(t, launches, graph_ms).c_str());
    }
    nlohmann::json j = kernel_json(t, launches, a.hbm_gbps, graph_ms);
    j["context"] = ctx;
    kernel_steps_json.push_back(j);
  }

  if (!a.json_out.empty()) {
    nlohmann::json j = {{"plan", a.plan},
                        {"device", dev.name},
                        {"arch", dev.arch},
                        {"graphs", !a.no_graphs},
                        {"plan_open_s", open_s},
                        {"session_load_s", r.load_seconds},
                        {"steps", r.steps},
                        {"context", r.context},
                        {"decode_step_ms_median", r.step_ms_median},
                        {"decode_step_ms_min", r.step_ms_min},
                        {"decode_step_ms_p90", r.step_ms_p90},
                        {"read_bytes_per_step", r.read_bytes},
                        {"decode_weight_bytes", info.decode_read_bytes},
                        {"kv_bytes_per_token", info.kv_bytes_per_token},
                        {"achieved_gb_per_s", r.achieved_gbps},
                        {"weight_bytes", info.weight_bytes},
                        {"buckets", buckets}};
    if (a.kernels) j["kernel_steps"] = kernel_steps_json;
    std::ofstream out(a.json_out);
    if (!out) throw Error("cannot write " + a.json_out);
    out << j.dump(2) << "\n";
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Measure a plan on the GPU: load time and AR decode step time / bandwidth; or, with --acceptance PROMPTS, "
      "the drafter's acceptance and speed-up over a prompt file (AR, chain DFlash, DDTree per budget)");
  cmd->add_option("plan", args->plan, "the .kplan file (with --acceptance: MODEL, a plan or a checkpoint directory)")
      ->required();
  const std::vector<CLI::Option*> gpu_only = {
      cmd->add_option("--steps", args->steps, "timed decode replays (median reported)")->capture_default_str(),
      cmd->add_option("--context", args->context, "cached positions the decode step attends (clamped to the plan)")
          ->capture_default_str(),
      cmd->add_flag("--no-graphs", args->no_graphs, "plain launches instead of CUDA graph replay"),
      cmd->add_flag("--all-buckets", args->all_buckets,
                    "also time a step of every target bucket (tree verify / prefill sizes)"),
      cmd->add_flag("--kernels", args->kernels,
                    "also time each launch of the --kernel-tokens steps (events between launches): per kernel and "
                    "family, ms, bytes read, GB/s and % of --hbm-gbps"),
      cmd->add_flag("--in-graph", args->in_graph,
                    "with --kernels: also each launch's marginal time inside the step's CUDA graph (graphs of the step's "
                    "first k launches, k = 1 .. all; a launch's figure is its prefix less the one before)"),
      cmd->add_option("--kernel-tokens", args->kernel_tokens, "with --kernels: the steps to time (target buckets)")
          ->capture_default_str(),
      cmd->add_option("--hbm-gbps", args->hbm_gbps, "with --kernels: the floor bandwidth in GB/s (1e9 bytes)")
          ->capture_default_str(),
  };
  cmd->add_option("--json", args->json_out, "also write the figures as JSON to this file");
  const AcceptanceOptions acceptance = add_acceptance_options(cmd, gpu_only);
  cmd->callback([args, acceptance] {
    if (acceptance.acceptance->count() > 0)
      run_acceptance_bench(*acceptance.args, args->plan, args->json_out);
    else
      run_bench(*args);
  });
}

}  // namespace kplan::cli
