#pragma once
// The on-disk kernel cache. An entry is one cubin, keyed by a hash of everything it depends on
// (kernel_cache_key). Entries are written to a temporary file and published with one atomic
// rename, so concurrent compiles never see half an entry; each entry carries its key, size and a
// checksum of the cubin, so a damaged entry is detected (and recompiled), never used.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "compiler/codegen/template_library.h"

namespace kplan::codegen {

// XXH3-64 (hex, 16 digits) over: a format tag, the entry name, NVRTC version, arch, options,
// the generated source and every header it includes (name and content).
std::string kernel_cache_key(const KernelSource& source, const std::vector<HeaderFile>& headers,
                             const std::string& nvrtc_version, const std::string& arch,
                             const std::vector<std::string>& options);

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir);

  // $KPLAN_CACHE_DIR, else $XDG_CACHE_HOME/kplan/kernels, else ~/.cache/kplan/kernels.
  static std::filesystem::path default_dir();

  enum class Lookup { Hit, Miss, Corrupt };
  // Hit: `cubin` holds the entry. Corrupt: an entry exists but fails its checks (it will be
  // replaced by the next store).
  Lookup load(const std::string& key, const std::string& id, std::vector<uint8_t>& cubin) const;
  // Publishes an entry atomically. Returns false (and leaves the cache as it was) when the
  // directory is not writable: the cache is an optimisation, never a reason to fail a compile.
  bool store(const std::string& key, const std::string& id, const std::vector<uint8_t>& cubin) const;

  std::filesystem::path entry_path(const std::string& key, const std::string& id) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace kplan::codegen
