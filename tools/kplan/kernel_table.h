#pragma once
// `kplan bench --kernels`: the per-launch figures of one step (kplan_session_bench_kernels)
// grouped by kernel instance and by family, each group's time, bytes, bandwidth and share of a
// floor bandwidth (the HBM's), as a table and as JSON; with --in-graph each launch's marginal time
// inside the step's graph beside them. Host code only: the figures come in.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kplan/kplan.h"

namespace kplan::cli {

struct KernelGroup {
  std::string name;    // the instance id (by kernel) or the family (by family)
  std::string family;
  int launches = 0;
  double ms = 0;       // summed medians
  double weight_bytes = 0, activation_bytes = 0;
  double bytes() const { return weight_bytes + activation_bytes; }
  double gbps() const { return ms > 0 ? bytes() / (ms * 1e-3) / 1e9 : 0; }
  // Percent of `floor_gbps` (GB/s, 1e9 bytes) the group's bytes over its time reach.
  double floor_percent(double floor_gbps) const { return floor_gbps > 0 ? 100.0 * gbps() / floor_gbps : 0; }
};

// Groups by kernel instance (by_family = false) or by family, the slowest first (ties: by name).
inline std::vector<KernelGroup> group_launches(const std::vector<kplan_kernel_time>& launches, bool by_family) {
  std::map<std::string, KernelGroup> groups;
  for (const kplan_kernel_time& l : launches) {
    const std::string key = by_family ? l.family : l.kernel;
    KernelGroup& g = groups[key];
    g.name = key;
    g.family = l.family;
    g.launches += 1;
    g.ms += l.ms_median;
    g.weight_bytes += l.weight_bytes;
    g.activation_bytes += l.activation_bytes;
  }
  std::vector<KernelGroup> out;
  for (auto& [key, g] : groups) out.push_back(g);
  std::stable_sort(out.begin(), out.end(), [](const KernelGroup& a, const KernelGroup& b) { return a.ms > b.ms; });
  return out;
}

inline KernelGroup total_of(const std::vector<kplan_kernel_time>& launches) {
  KernelGroup t;
  t.name = "all launches";
  for (const kplan_kernel_time& l : launches) {
    t.launches += 1;
    t.ms += l.ms_median;
    t.weight_bytes += l.weight_bytes;
    t.activation_bytes += l.activation_bytes;
  }
  return t;
}

// The table of one step: one row per kernel instance, then per family, then the sum.
inline std::string kernel_table(int tokens, const std::vector<kplan_kernel_time>& launches, double floor_gbps) {
  std::string out;
  char line[512];
  const KernelGroup total = total_of(launches);
  std::snprintf(line, sizeof line, "step of %d token%s: %d launches, %.4f ms summed, floor %.0f GB/s\n", tokens,
                tokens == 1 ? "" : "s", total.launches, total.ms, floor_gbps);
  out += line;
  auto row = [&](const KernelGroup& g) {
    std::snprintf(line, sizeof line, "  %-64s %5d %10.4f %6.1f%% %11.3f %11.3f %10.1f %7.1f%%\n", g.name.c_str(), g.launches, g.ms,
                  total.ms > 0 ? 100.0 * g.ms / total.ms : 0.0, g.weight_bytes / (1024.0 * 1024.0),
                  g.activation_bytes / (1024.0 * 1024.0), g.gbps(), g.floor_percent(floor_gbps));
    out += line;
  };
  auto header = [&](const char* what) {
    std::snprintf(line, sizeof line, "  %-64s %5s %10s %7s %11s %11s %10s %8s\n", what, "n", "ms", "step", "weight MiB", "act MiB",
                  "GB/s", "floor");
    out += line;
  };
  header("kernel");
  for (const KernelGroup& g : group_launches(launches, false)) row(g);
  header("family");
  for (const KernelGroup& g : group_launches(launches, true)) row(g);
  row(total);
  return out;
}

// `--in-graph`: each launch in step order with its events time and its marginal time inside the
// step's graph (kplan_session_bench_graph_prefixes), then the marginal summed per family: where the
// graph's time goes once programmatic dependent launch overlaps each launch with the one before.
inline std::string graph_marginal_table(int tokens, const std::vector<kplan_kernel_time>& launches, const std::vector<double>& graph_ms) {
  std::string out;
  char line[512];
  double sum = 0;
  for (double m : graph_ms) sum += m;
  std::snprintf(line, sizeof line, "step of %d token%s inside its graph: %zu launches, %.4f ms (each launch: its graph prefix less the one before)\n",
                tokens, tokens == 1 ? "" : "s", graph_ms.size(), sum);
  out += line;
  std::snprintf(line, sizeof line, "  %5s %10s %10s  %s\n", "#", "events ms", "graph ms", "kernel");
  out += line;
  std::vector<kplan_kernel_time> in_graph;  // the launches with their graph times, grouped below as --kernels groups
  for (size_t i = 0; i < launches.size() && i < graph_ms.size(); ++i) {
    std::snprintf(line, sizeof line, "  %5d %10.4f %10.4f  %s\n", launches[i].launch, launches[i].ms_median, graph_ms[i], launches[i].kernel);
    out += line;
    in_graph.push_back(launches[i]);
    in_graph.back().ms_median = graph_ms[i];
  }
  std::snprintf(line, sizeof line, "  %-40s %5s %10s %7s\n", "family", "n", "graph ms", "step");
  out += line;
  for (const KernelGroup& g : group_launches(in_graph, true)) {
    std::snprintf(line, sizeof line, "  %-40s %5d %10.4f %6.1f%%\n", g.name.c_str(), g.launches, g.ms, sum > 0 ? 100.0 * g.ms / sum : 0.0);
    out += line;
  }
  return out;
}

inline nlohmann::json group_json(const KernelGroup& g, double floor_gbps) {
  return {{"name", g.name},         {"family", g.family},
          {"launches", g.launches}, {"ms", g.ms},
          {"weight_bytes", g.weight_bytes}, {"activation_bytes", g.activation_bytes},
          {"gb_per_s", g.gbps()},   {"floor_percent", g.floor_percent(floor_gbps)}};
}

// graph_ms: each launch's marginal time inside the step's graph (--in-graph), or empty.
inline nlohmann::json kernel_json(int tokens, const std::vector<kplan_kernel_time>& launches, double floor_gbps,
                                  const std::vector<double>& graph_ms = {}) {
  nlohmann::json per_launch = nlohmann::json::array(), kernels = nlohmann::json::array(), families = nlohmann::json::array();
  for (const kplan_kernel_time& l : launches) {
    const double bytes = l.weight_bytes + l.activation_bytes;
    const double gbps = l.ms_median > 0 ? bytes / (l.ms_median * 1e-3) / 1e9 : 0;
    per_launch.push_back({{"launch", l.launch},
                          {"kernel", l.kernel},
                          {"family", l.family},
                          {"op", l.note},
                          {"ms", l.ms_median},
                          {"weight_bytes", l.weight_bytes},
                          {"activation_bytes", l.activation_bytes},
                          {"gb_per_s", gbps},
                          {"floor_percent", floor_gbps > 0 ? 100.0 * gbps / floor_gbps : 0}});
    if (static_cast<size_t>(l.launch) < graph_ms.size()) per_launch.back()["graph_ms"] = graph_ms[static_cast<size_t>(l.launch)];
  }
  for (const KernelGroup& g : group_launches(launches, false)) kernels.push_back(group_json(g, floor_gbps));
  for (const KernelGroup& g : group_launches(launches, true)) families.push_back(group_json(g, floor_gbps));
  return {{"tokens", tokens},
          {"floor_gb_per_s", floor_gbps},
          {"total", group_json(total_of(launches), floor_gbps)},
          {"kernels", kernels},
          {"families", families},
          {"launches", per_launch}};
}

}  // namespace kplan::cli
