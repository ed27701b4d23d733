// kplan soak: memory that stays flat under long use (issue 12 item 5). Two phases on one model:
//   tokens    one session generates --tokens tokens in calls of --chunk (the session reset between
//             calls when the context is full), host RSS and device memory sampled after each call;
//   sessions  --sessions sessions opened, given a short generate, and closed, one after another,
//             sampled every tenth of them.
// Each series is judged from its first sample after the warm-up (the first call, the first tenth
// of the sessions) to its last: flat when it grew by no more than --tolerance-mib. Prints a table
// and exits 1 naming the series that grew; --json FILE writes the samples.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/model_source.h"
#include "tools/kplan/soak_figures.h"

namespace kplan::cli {
namespace {

struct SoakArgs {
  std::string plan, device = "auto", json_out;
  int64_t tokens = 10000, chunk = 500, sessions = 1000;
  double tolerance_mib = 4.0;
};

// Resident set size of this process (/proc/self/statm's second field, in pages).
uint64_t host_rss() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) throw Error("kplan soak: cannot read /proc/self/statm");
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t device_used(kplan_model* model) {
  kplan_model_info info{};
  info.struct_size = sizeof info;
  api_check(kplan_model_info_get(model, &info));
  return info.device_memory_used;
}

// One generate of `n` tokens from a fixed prompt, EOS ignored (DDTree at budget 15 with the
// plan's drafter when it has one: the rounds' buffers and graphs are exercised too); the tokens
// it made.
int32_t generate(kplan_session* session, int64_t n, bool drafter) {
  static const int32_t prompt[] = {1, 2, 3, 4, 5, 6, 7, 8};
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  if (drafter) {
    g.spec = KPLAN_SPEC_DDTREE;
    g.budget = 15;
  }
  g.max_new = static_cast<int32_t>(n);
  g.stop_at_eos = 0;
  std::vector<int32_t> out(static_cast<size_t>(n));
  int32_t made = 0;
  api_check(kplan_session_generate(session, prompt, 8, &g, out.data(), static_cast<int32_t>(n), &made, nullptr));
  return made;
}

struct Phase {
  std::string name;
  MemorySeries rss{"host RSS", {}}, device{"device memory", {}};
  int64_t units = 0;  // tokens generated / sessions closed
  double seconds = 0;
};

void sample(Phase& p, kplan_model* model, bool gpu) {
  p.rss.bytes.push_back(host_rss());
  if (gpu) p.device.bytes.push_back(device_used(model));
}

void run_soak(const SoakArgs& a) {
  if (a.tokens < 1 || a.chunk < 1 || a.sessions < 1) throw UsageError("--tokens, --chunk and --sessions must be positive");
  if (!(a.tolerance_mib >= 0)) throw UsageError("--tolerance-mib must be a number >= 0");
  PlanPtr plan = open_plan(a.plan.c_str(), true);
  ModelPtr model = create_model(plan.get(), device_kind(a.device));
  kplan_model_info info{};
  info.struct_size = sizeof info;
  api_check(kplan_model_info_get(model.get(), &info));
  const bool gpu = info.device == KPLAN_DEVICE_GPU;
  kplan_plan_info pinfo{};
  pinfo.struct_size = sizeof pinfo;
  api_check(kplan_plan_info_get(plan.get(), &pinfo));
  const bool drafter = pinfo.has_drafter != 0;
  kplan_session_options so;
  kplan_session_options_init(&so);

  std::vector<Phase> phases(2);
  phases[0].name = "tokens";
  phases[1].name = "sessions";
  {
    Phase& p = phases[0];
    const auto t0 = std::chrono::steady_clock::now();
    SessionPtr session = create_session(model.get(), so);
    const int64_t room = kplan_session_max_context(session.get()) - 8;
    if (room < 1) throw Error("kplan soak: the plan's context holds no token after the 8-token prompt");
    const int64_t chunk = std::min(a.chunk, room);
    while (p.units < a.tokens) {
      api_check(kplan_session_reset(session.get()));
      const int32_t made = generate(session.get(), std::min(chunk, a.tokens - p.units), drafter);
      if (made < 1) throw Error("kplan soak: a generate call made no token");
      p.units += made;
      sample(p, model.get(), gpu);
    }
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  {
    Phase& p = phases[1];
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t every = std::max<int64_t>(1, a.sessions / 10);
    for (int64_t i = 1; i <= a.sessions; ++i) {
      SessionPtr session = create_session(model.get(), so);
      generate(session.get(), 4, drafter);
      session.reset();
      ++p.units;
      if (i % every == 0 || i == a.sessions) sample(p, model.get(), gpu);
    }
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  const uint64_t tolerance = static_cast<uint64_t>(a.tolerance_mib * 1024 * 1024);
  auto mib = [](double b) { return b / (1024.0 * 1024.0); };
  std::printf("kplan soak: %s on the %s (%s), tolerance %.1f MiB per series\n", a.plan.c_str(), gpu ? "GPU" : "CPU",
              drafter ? "DDTree budget 15" : "AR", a.tolerance_mib);
  std::printf("%-9s %-14s %9s %8s %12s %12s %12s %10s  %s\n", "phase", "series", "units", "s", "first MiB", "last MiB",
              "peak MiB", "grown KiB", "verdict");
  nlohmann::json doc = {{"plan", a.plan}, {"device", gpu ? "gpu" : "cpu"}, {"tolerance_bytes", tolerance}, {"phases", nlohmann::json::array()}};
  std::vector<std::string> grew;
  for (Phase& p : phases) {
    nlohmann::json jp = {{"name", p.name}, {"units", p.units}, {"seconds", p.seconds}};
    for (MemorySeries* s : {&p.rss, &p.device}) {
      if (s->bytes.empty()) continue;
      // The first sample is the warm-up's (the first call, the first tenth of the sessions).
      MemorySeries judged{s->what, std::vector<uint64_t>(s->bytes.begin() + (s->bytes.size() > 1 ? 1 : 0), s->bytes.end())};
      const Growth g = growth_of(judged, tolerance);
      std::printf("%-9s %-14s %9lld %8.2f %12.2f %12.2f %12.2f %10.1f  %s\n", p.name.c_str(), s->what.c_str(),
                  static_cast<long long>(p.units), p.seconds, mib(static_cast<double>(g.first)), mib(static_cast<double>(g.last)),
                  mib(static_cast<double>(g.peak)), static_cast<double>(g.grown) / 1024.0, g.flat ? "flat" : "GREW");
      if (!g.flat) grew.push_back(p.name + " " + s->what);
      jp[s == &p.rss ? "host_rss_bytes" : "device_memory_bytes"] = s->bytes;
      jp[s == &p.rss ? "host_rss_flat" : "device_memory_flat"] = g.flat;
    }
    doc["phases"].push_back(jp);
  }
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    if (!f) throw Error("cannot write " + a.json_out);
    f << doc.dump(1) << "\n";
  }
  if (!grew.empty()) {
    std::string what;
    for (const std::string& g : grew) what += (what.empty() ? "" : ", ") + g;
    throw Error("kplan soak: memory grew past the tolerance: " + what);
  }
}

}  // namespace

void register_soak(CLI::App& app) {
  auto args = std::make_shared<SoakArgs>();
  CLI::App* c = app.add_subcommand("soak", "Check that memory stays flat: many tokens in one session, many sessions on one model");
  c->add_option("plan", args->plan, "the .kplan plan")->required();
  c->add_option("--device", args->device, "where to run (auto: the GPU when present)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}))
      ->capture_default_str();
  c->add_option("--tokens", args->tokens, "tokens to generate in one session")->capture_default_str();
  c->add_option("--chunk", args->chunk, "tokens per generate call (the session is reset between calls)")->capture_default_str();
  c->add_option("--sessions", args->sessions, "sessions to open and close on the model")->capture_default_str();
  c->add_option("--tolerance-mib", args->tolerance_mib, "growth allowed per memory series after the warm-up")
      ->capture_default_str();
  c->add_option("--json", args->json_out, "write the samples and verdicts as JSON");
  c->callback([args] { run_soak(*args); });
}

}  // namespace kplan::cli
