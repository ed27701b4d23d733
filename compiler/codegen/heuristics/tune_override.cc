#include "compiler/codegen/heuristics/tune_override.h"

#include <charconv>
#include <cstdlib>

#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void fail(std::string_view entry, const std::string& why) {
  throw Error("KPLAN_TUNE entry '" + std::string(entry) + "': " + why);
}

// "NAME=V,NAME=V" into `out`.
void parse_assignments(std::string_view list, std::string_view entry, ParamValues& out) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) fail(entry, "expected NAME=VALUE, got '" + std::string(item) + "'");
    const std::string_view name = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || end != value.data() + value.size())
      fail(entry, "the value of " + std::string(name) + " must be an integer, not '" + std::string(value) + "'");
    out[std::string(name)] = v;
  }
}

}  // namespace

std::vector<TuneOverride> parse_tune_overrides(std::string_view text) {
  std::vector<TuneOverride> out;
  while (!text.empty()) {
    const size_t semi = text.find(';');
    const std::string_view entry = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon == std::string_view::npos) fail(entry, "expected FAMILY[COND=V,...]:PARAM=V,...");
    std::string_view head = trim(entry.substr(0, colon));
    TuneOverride o;
    if (const size_t open = head.find('['); open != std::string_view::npos) {
      if (head.back() != ']') fail(entry, "a condition list opened with '[' must end with ']'");
      parse_assignments(head.substr(open + 1, head.size() - open - 2), entry, o.when);
      head = trim(head.substr(0, open));
    }
    if (head.empty()) fail(entry, "no family name");
    o.family = std::string(head);
    parse_assignments(entry.substr(colon + 1), entry, o.set);
    if (o.set.empty()) fail(entry, "sets nothing");
    out.push_back(std::move(o));
  }
  return out;
}

void apply_tune_overrides(const std::vector<TuneOverride>& overrides, const Family& family, ParamValues& params) {
  for (const TuneOverride& o : overrides) {
    if (o.family != family.name) continue;
    bool match = true;
    for (const auto& [name, v] : o.when) {
      const auto it = params.find(name);
      match = match && it != params.end() && it->second == v;
    }
    if (!match) continue;
    for (const auto& [name, v] : o.set) {
      bool tuning = false;
      for (const ParamSpec& spec : family.params) tuning = tuning || (spec.name == name && spec.is_tuning);
      if (!tuning) throw Error("KPLAN_TUNE: " + name + " is not a tuning parameter of kernel family " + family.name);
      params[name] = v;
    }
  }
}

const std::vector<TuneOverride>& env_tune_overrides() {
  static const std::vector<TuneOverride> parsed = [] {
    const char* env = std::getenv("KPLAN_TUNE");
    return env ? parse_tune_overrides(env) : std::vector<TuneOverride>{};
  }();
  return parsed;
}

}  // namespace kplan::codegen
