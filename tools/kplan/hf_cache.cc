#include "tools/kplan/hf_cache.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <vector>

#include "ir/support/error.h"

namespace kplan::cli {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A models--ORG--NAME folder: refs/main's snapshot, else its only snapshot.
fs::path snapshot_of(const fs::path& repo, const std::string& what, const std::string& arg) {
  std::error_code ec;
  const fs::path snapshots = repo / "snapshots";
  if (!fs::is_directory(snapshots, ec))
    throw Error(what + " '" + arg + "': " + repo.string() + " has no snapshots/ folder (an interrupted download?)");
  std::ifstream ref(repo / "refs" / "main");
  std::string commit;
  if (ref && std::getline(ref, commit) && !commit.empty()) {
    const fs::path snap = snapshots / commit;
    if (fs::is_directory(snap, ec)) return snap;
    throw Error(what + " '" + arg + "': refs/main names snapshot " + commit + ", which " + snapshots.string() +
                " does not hold");
  }
  std::vector<fs::path> found;
  for (const fs::directory_entry& e : fs::directory_iterator(snapshots, ec))
    if (e.is_directory()) found.push_back(e.path());
  if (found.size() == 1) return found.front();
  if (found.empty()) throw Error(what + " '" + arg + "': " + snapshots.string() + " is empty (an interrupted download?)");
  std::string list;
  for (const fs::path& p : found) list += (list.empty() ? "" : ", ") + p.filename().string();
  throw Error(what + " '" + arg + "': " + repo.string() + " has no refs/main and " + std::to_string(found.size()) +
              " snapshots (" + list + "): give the snapshot folder itself");
}

}  // namespace

fs::path hf_hub_cache() {
  if (const std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (const std::string v = env("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  if (const std::string v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "huggingface" / "hub";
  return fs::path(env("HOME")) / ".cache" / "huggingface" / "hub";
}

std::string resolve_model_argument(const std::string& arg, const std::string& what) {
  std::error_code ec;
  const fs::path path(arg);
  if (fs::exists(path, ec)) {
    const std::string name = fs::weakly_canonical(path, ec).filename().string();
    if (fs::is_directory(path, ec) && name.rfind("models--", 0) == 0 && !fs::exists(path / "config.json", ec))
      return snapshot_of(path, what, arg).string();
    return arg;
  }
  static const std::regex repo_id(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$)");
  if (!std::regex_match(arg, repo_id)) throw Error(what + " '" + arg + "' does not exist");
  const fs::path cache = hf_hub_cache();
  const std::string org = arg.substr(0, arg.find('/')), name = arg.substr(arg.find('/') + 1);
  const fs::path repo = cache / ("models--" + org + "--" + name);
  if (!fs::is_directory(repo, ec))
    throw Error(what + " '" + arg + "' is not a path, and the HuggingFace cache " + cache.string() + " has no " +
                repo.filename().string() + " (kplan downloads nothing: fetch it first, e.g. `huggingface-cli download " +
                arg + "`, or set HF_HUB_CACHE / HF_HOME)");
  return snapshot_of(repo, what, arg).string();
}

}  // namespace kplan::cli
