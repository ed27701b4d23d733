#include "compiler/codegen/kernel_cache.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>


namespace kplan::codegen {
namespace {

// Entry layout: magic (8) | key (16 hex chars) | cubin size (u64 LE) | XXH3-64 of cubin (u64 LE) | cubin.
constexpr char kMagic[8] = {'K', 'P', 'L', 'C', 'U', 'B', 'N', '1'};
constexpr size_t kHeaderSize = 8 + 16 + 8 + 8;
// Bumped when the key recipe or the entry layout changes, so old entries simply miss.
constexpr const char* kKeyFormat = "kplan-kernel-cache-v1";

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Feeds one length-prefixed field, so ("ab", "c") and ("a", "bc") hash differently.
void feed(XXH3_state_t* state, const std::string& s) {
  const uint64_t n = s.size();
  XXH3_64bits_update(state, &n, sizeof n);
  XXH3_64bits_update(state, s.data(), s.size());
}

}  // namespace

std::string kernel_cache_key(const KernelSource& source, const std::vector<HeaderFile>& headers,
                             const std::string& nvrtc_version, const std::string& arch,
                             const std::vector<std::string>& options) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  feed(state, kKeyFormat);
  feed(state, source.entry);
  feed(state, nvrtc_version);
  feed(state, arch);
  for (const std::string& o : options) feed(state, o);
  feed(state, source.source);
  for (const auto& [name, text] : headers) {
    feed(state, name);
    feed(state, text);
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hex64(h);
}

KernelCache::KernelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::filesystem::path KernelCache::default_dir() {
  if (const char* d = std::getenv("KPLAN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "kplan" / "kernels";
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".cache" / "kplan" / "kernels";
  }
  return std::filesystem::temp_directory_path() / "kplan-kernels";
}

std::filesystem::path KernelCache::entry_path(const std::string& key, const std::string& id) const {
  // The readable id first (for people listing the directory), the key makes it unique.
  return dir_ / (id + "." + key + ".kcubin");
}

KernelCache::Lookup KernelCache::load(const std::string& key, const std::string& id,
                                      std::vector<uint8_t>& cubin) const {
  std::ifstream in(entry_path(key, id), std::ios::binary);
  if (!in) return Lookup::Miss;
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, 8) != 0 ||
      data.compare(8, 16, key) != 0) {
    return Lookup::Corrupt;
  }
  const uint64_t size = get_u64(data.data() + 24);
  const uint64_t checksum = get_u64(data.data() + 32);
  if (size != data.size() - kHeaderSize) return Lookup::Corrupt;
  const char* body = data.data() + kHeaderSize;
  if (XXH3_64bits(body, size) != checksum) return Lookup::Corrupt;
  cubin.assign(body, body + size);
  return Lookup::Hit;
}

bool KernelCache::store(const std::string& key, const std::string& id,
                        const std::vector<uint8_t>& cubin) const {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return false;
  std::string data(kMagic, 8);
  data += key;
  put_u64(data, cubin.size());
  put_u64(data, XXH3_64bits(cubin.data(), cubin.size()));
  data.append(reinterpret_cast<const char*>(cubin.data()), cubin.size());
  // A name no other writer (thread or process) uses; the rename publishes it in one step.
  const std::filesystem::path tmp =
      dir_ / (".tmp." + key + "." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, entry_path(key, id), ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace kplan::codegen
