#include "runtime/ddtree/decode_stats.h"

#include <cstdio>

namespace kplan {

std::string format_stats(const DecodeStats& s) {
  std::string out;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
    out += '\n';
  };
  add("stats: prompt tokens        %lld", static_cast<long long>(s.prompt_tokens));
  add("stats: generated tokens     %lld", static_cast<long long>(s.generated_tokens));
  add("stats: rounds               %lld", static_cast<long long>(s.rounds));
  add("stats: mean acceptance len  %.3f (tokens per verify pass)", s.mean_acceptance_length());
  add("stats: mean verify tokens   %.2f", s.rounds ? static_cast<double>(s.tree_nodes) / s.rounds : 0.0);
  add("stats: target forwards      %lld (AR: %lld, saved %lld)",
      static_cast<long long>(s.target_forwards), static_cast<long long>(s.ar_forwards()),
      static_cast<long long>(s.ar_forwards() - s.target_forwards));
  if (s.stopped_at_context) add("stats: stopped              context full");
  add("stats: time prefill         %.3f ms", s.seconds.prefill * 1e3);
  add("stats: time draft           %.3f ms", s.seconds.draft * 1e3);
  add("stats: time tree build      %.3f ms", s.seconds.tree_build * 1e3);
  add("stats: time verify          %.3f ms", s.seconds.verify * 1e3);
  add("stats: time walk+commit     %.3f ms", s.seconds.walk_commit * 1e3);
  return out;
}

}  // namespace kplan
