#pragma once
// Compiles kernel sources for every requested arch: disk cache first, NVRTC on a miss, a small
// thread pool for the misses, progress lines for long compiles, and hit / miss counts.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "compiler/codegen/template_library.h"

namespace kplan::codegen {

struct CompileOptions {
  std::vector<std::string> archs = {"sm_90"};      // any spelling canonical_arch accepts
  bool use_cache = true;
  std::optional<std::filesystem::path> cache_dir;  // default: KernelCache::default_dir()
  int threads = 2;                                 // NVRTC compiles in flight at once
  const TemplateLibrary* templates = nullptr;      // default: TemplateLibrary::embedded()
  std::vector<std::string> extra_nvrtc_options;    // appended to nvrtc_options(arch)
  // Receives one line per compiled kernel and a summary; null: lines go to stderr, but only
  // once a compile has taken more than a second (a warm cache stays quiet).
  std::function<void(const std::string&)> progress;
};

struct CompileStats {
  int hits = 0;      // cubins read from the cache
  int misses = 0;    // cubins compiled by NVRTC (includes corrupt entries)
  int corrupt = 0;   // cache entries that failed their checks and were recompiled
  int store_failures = 0;  // entries that could not be written (read-only cache dir)
  double wall_seconds = 0;      // whole call
  double compile_seconds = 0;   // sum of NVRTC times
  std::string summary() const;  // "kernels: 40 (38 cached, 2 compiled, 0 corrupt) in 1.23 s"
};

// Returns one instance per (source, arch), source-major: result[i * archs + a]. Throws
// kplan::Error on the first failing compile (with NVRTC's log).
std::vector<KernelInstance> compile_kernels(const std::vector<KernelSource>& sources,
                                            const CompileOptions& options,
                                            CompileStats* stats = nullptr);

}  // namespace kplan::codegen
