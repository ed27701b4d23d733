#include "compiler/codegen/compile_kernels.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "compiler/codegen/kernel_cache.h"
#include "compiler/codegen/nvrtc_compile.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string arch_tag(const std::string& arch) {  // "sm_90" -> "sm90"
  std::string s = arch;
  if (s.size() > 3 && s[2] == '_') s.erase(2, 1);
  return s;
}

}  // namespace

std::string CompileStats::summary() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "kernels: %d (%d cached, %d compiled, %d corrupt entries) in %.2f s (NVRTC %.2f s)",
                hits + misses, hits, misses, corrupt, wall_seconds, compile_seconds);
  return buf;
}

std::vector<KernelInstance> compile_kernels(const std::vector<KernelSource>& sources,
                                            const CompileOptions& options, CompileStats* stats_out) {
  const Clock::time_point t0 = Clock::now();
  if (options.archs.empty()) throw Error("codegen: no GPU arch requested");
  std::vector<std::string> archs;
  for (const std::string& a : options.archs) archs.push_back(canonical_arch(a));
  const TemplateLibrary& templates = options.templates ? *options.templates : TemplateLibrary::embedded();
  const std::string version = nvrtc_version();
  const KernelCache cache(options.cache_dir.value_or(KernelCache::default_dir()));

  // Phase 1 (serial, cheap): keys and cache lookups.
  std::vector<KernelInstance> out;
  std::vector<std::vector<HeaderFile>> headers_of(sources.size());
  std::vector<size_t> to_compile;
  CompileStats stats;
  for (size_t s = 0; s < sources.size(); ++s) {
    headers_of[s] = templates.includes_of(sources[s].source);
    for (const std::string& arch : archs) {
      KernelInstance inst;
      inst.src = sources[s];
      inst.arch = arch;
      inst.id = sources[s].id + "_" + arch_tag(arch);
      if (!sources[s].library.empty()) {  // a library call: nothing to compile or cache
        out.push_back(std::move(inst));
        continue;
      }
      inst.options = nvrtc_options(arch);
      inst.options.insert(inst.options.end(), options.extra_nvrtc_options.begin(), options.extra_nvrtc_options.end());
      inst.cache_key = kernel_cache_key(inst.src, headers_of[s], version, arch, inst.options);
      KernelCache::Lookup found = KernelCache::Lookup::Miss;
      if (options.use_cache) found = cache.load(inst.cache_key, inst.id, inst.cubin);
      if (found == KernelCache::Lookup::Hit && cubin_has_entry(inst.cubin, inst.entry())) {
        inst.cache_hit = true;
        ++stats.hits;
      } else {
        if (found != KernelCache::Lookup::Miss) ++stats.corrupt;
        inst.cubin.clear();
        to_compile.push_back(out.size());
        ++stats.misses;
      }
      out.push_back(std::move(inst));
    }
  }

  // Phase 2: NVRTC for the misses on a few threads.
  std::mutex mutex;  // guards stats, first_error, progress output
  std::exception_ptr first_error;
  std::atomic<size_t> next{0};
  int done = 0;
  bool loud = false;
  auto report = [&](const std::string& line) {
    if (options.progress) {
      options.progress(line);
    } else if (loud) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  };
  auto worker = [&] {
    for (size_t i = next++; i < to_compile.size(); i = next++) {
      KernelInstance& inst = out[to_compile[i]];
      const size_t s = to_compile[i] / archs.size();
      try {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (first_error) return;
        }
        const Clock::time_point c0 = Clock::now();
        inst.cubin = nvrtc_compile(inst.src, headers_of[s], inst.options);
        const double took = seconds_since(c0);
        if (!cubin_has_entry(inst.cubin, inst.entry())) {
          throw Error("codegen: NVRTC cubin of " + inst.id + " lacks its entry " + inst.entry());
        }
        const bool stored = !options.use_cache || cache.store(inst.cache_key, inst.id, inst.cubin);
        std::lock_guard<std::mutex> lock(mutex);
        stats.compile_seconds += took;
        if (!stored) ++stats.store_failures;
        ++done;
        loud = loud || seconds_since(t0) > 1.0;
        char line[256];
        std::snprintf(line, sizeof line, "codegen: [%d/%zu] %s (%.2f s)", done, to_compile.size(),
                      inst.id.c_str(), took);
        report(line);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
        return;
      }
    }
  };
  const int n_threads = std::max(1, std::min<int>(options.threads, static_cast<int>(to_compile.size())));
  if (!to_compile.empty()) {
    std::vector<std::thread> pool;
    for (int t = 1; t < n_threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
  }
  if (first_error) std::rethrow_exception(first_error);
  stats.wall_seconds = seconds_since(t0);
  if (!to_compile.empty()) report("codegen: " + stats.summary() + ", cache " + cache.dir().string());
  if (stats_out) *stats_out = stats;
  return out;
}

}  // namespace kplan::codegen
