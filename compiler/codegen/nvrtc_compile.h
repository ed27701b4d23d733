#pragma once
// NVRTC: compile one generated kernel source to a cubin for one GPU arch. No caching here
// (kernel_cache.h, compile_kernels.h).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "compiler/codegen/template_library.h"

namespace kplan::codegen {

// The NVRTC library's version, "13.0".
std::string nvrtc_version();
// The archs this NVRTC can build cubins for: "sm_75", ..., "sm_90", "sm_120", ...
std::vector<std::string> nvrtc_supported_archs();
// Accepts "sm_90", "sm90", "90", "sm_90a"; returns the canonical "sm_90" / "sm_90a". Throws
// kplan::Error naming the arch when it is malformed or this NVRTC cannot target it.
std::string canonical_arch(std::string_view arch);
// The NVRTC options kplan compiles with for `arch` (canonical).
std::vector<std::string> nvrtc_options(const std::string& arch);

// Compiles `source` (whose headers are `headers`, passed in memory) with `options`. Returns the
// cubin; throws kplan::Error with the kernel id and NVRTC's log on failure. `log` (optional)
// receives NVRTC's log of a successful compile (warnings, ptxas -v output).
std::vector<uint8_t> nvrtc_compile(const KernelSource& source, const std::vector<HeaderFile>& headers,
                                   const std::vector<std::string>& options, std::string* log = nullptr);

// True when `cubin` starts with the ELF magic and contains `entry` as a symbol name.
bool cubin_has_entry(const std::vector<uint8_t>& cubin, const std::string& entry);

}  // namespace kplan::codegen
