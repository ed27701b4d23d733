#include "compiler/codegen/nvrtc_compile.h"

#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

void check(nvrtcResult r, const std::string& what) {
  if (r != NVRTC_SUCCESS) throw Error("codegen: NVRTC " + what + " failed: " + nvrtcGetErrorString(r));
}

// Frees the program on every path.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle) nvrtcDestroyProgram(&handle);
  }
};

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "version query");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_supported_archs() {
  int n = 0;
  check(nvrtcGetNumSupportedArchs(&n), "arch query");
  std::vector<int> archs(n);
  check(nvrtcGetSupportedArchs(archs.data()), "arch query");
  std::vector<std::string> out;
  for (int a : archs) out.push_back("sm_" + std::to_string(a));
  return out;
}

std::string canonical_arch(std::string_view arch) {
  std::string s(arch);
  if (s.rfind("sm_", 0) == 0) {
    s = s.substr(3);
  } else if (s.rfind("sm", 0) == 0) {
    s = s.substr(2);
  }
  std::string suffix;
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    suffix = s.substr(s.size() - 1);
    s.pop_back();
  }
  const bool digits = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!digits) throw Error("codegen: bad GPU arch '" + std::string(arch) + "' (expected e.g. sm_90, sm_120)");
  const std::string base = "sm_" + std::to_string(std::stoi(s));
  const std::vector<std::string> supported = nvrtc_supported_archs();
  if (std::find(supported.begin(), supported.end(), base) == supported.end()) {
    std::string list;
    for (const std::string& a : supported) list += (list.empty() ? "" : ", ") + a;
    throw Error("codegen: NVRTC " + nvrtc_version() + " cannot build for " + std::string(arch) + " (supported: " + list + ")");
  }
  return base + suffix;
}

std::vector<std::string> nvrtc_options(const std::string& arch) {
  // -lineinfo keeps profiles readable; no fast-math: the kernels must match the CPU reference.
  return {"--gpu-architecture=" + arch, "-std=c++17", "-lineinfo"};
}

std::vector<uint8_t> nvrtc_compile(const KernelSource& source, const std::vector<HeaderFile>& headers,
                                   const std::vector<std::string>& options, std::string* log_out) {
  std::vector<const char*> header_texts, header_names, option_ptrs;
  for (const auto& [name, text] : headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  Program prog;
  const std::string file_name = source.id + ".cu";
  check(nvrtcCreateProgram(&prog.handle, source.source.c_str(), file_name.c_str(),
                           static_cast<int>(headers.size()), header_texts.data(), header_names.data()),
        "create program for " + source.id);
  const nvrtcResult result = nvrtcCompileProgram(prog.handle, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog.handle, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(prog.handle, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (result != NVRTC_SUCCESS) {
    std::string opts;
    for (const std::string& o : options) opts += " " + o;
    throw Error("codegen: NVRTC failed to compile kernel " + source.id + " (options:" + opts + "): " +
                nvrtcGetErrorString(result) + "\n" + log + "\n--- generated source ---\n" + source.source);
  }
  if (log_out) *log_out = log;
  size_t size = 0;
  check(nvrtcGetCUBINSize(prog.handle, &size), "cubin size of " + source.id);
  if (size == 0) throw Error("codegen: NVRTC produced no cubin for " + source.id + " (was a virtual arch compute_XX given?)");
  std::vector<uint8_t> cubin(size);
  check(nvrtcGetCUBIN(prog.handle, reinterpret_cast<char*>(cubin.data())), "cubin of " + source.id);
  return cubin;
}

bool cubin_has_entry(const std::vector<uint8_t>& cubin, const std::string& entry) {
  static const uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (cubin.size() < 4 || std::memcmp(cubin.data(), kElfMagic, 4) != 0) return false;
  // Symbol names sit NUL-terminated in the string table: look for "\0entry\0".
  std::string needle(1, '\0');
  needle += entry;
  needle += '\0';
  return std::search(cubin.begin(), cubin.end(), needle.begin(), needle.end()) != cubin.end();
}

}  // namespace kplan::codegen
