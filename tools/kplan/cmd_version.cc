// kplan version / kplan --version: what this build is (kplan, the CUDA toolkit it was built
// against, the NVRTC it compiles kernels with, the archs it has kernel tuning for) and what this
// machine has (the GPU and driver, or why there is none).
#include <cstdio>
#include <string>

#include "compiler/codegen/nvrtc_compile.h"
#include "kplan/kplan.h"
#include "tools/kplan/commands.h"

#ifndef KPLAN_CUDA_TOOLKIT_VERSION
#define KPLAN_CUDA_TOOLKIT_VERSION "unknown"
#endif

namespace kplan::cli {

std::string version_text() {
  std::string t = std::string("kplan ") + kplan_version() + "\n";
  t += std::string("CUDA toolkit ") + KPLAN_CUDA_TOOLKIT_VERSION + " (built against; the driver is loaded at run time)\n";
  std::string nvrtc, targets;
  try {
    nvrtc = codegen::nvrtc_version();
    for (const std::string& a : codegen::nvrtc_supported_archs()) targets += (targets.empty() ? "" : ",") + a;
  } catch (const std::exception& e) {
    nvrtc = std::string("unavailable (") + e.what() + ")";
  }
  t += "NVRTC " + nvrtc + (targets.empty() ? "" : " (can target " + targets + ")") + "\n";
  t += "kernel tuning compiled in: sm_90 (Hopper), sm_120 (Blackwell); `kplan compile --arch` default sm_90\n";
  kplan_device_info d{};
  if (kplan_device_probe(&d) == KPLAN_STATUS_OK) {
    const int v = d.driver_version;
    t += std::string("GPU: ") + d.name + " (" + d.arch + ", " + std::to_string(d.sm_count) + " SMs, " +
         std::to_string(d.memory_bytes >> 30) + " GiB), driver CUDA " + std::to_string(v / 1000) + "." +
         std::to_string(v % 1000 / 10) + "\n";
  } else {
    t += std::string("GPU: none (") + kplan_error_last() + "); plans run on the CPU reference\n";
  }
  return t;
}

void register_version(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print what `kplan --version` prints");
  cmd->callback([] { std::fputs(version_text().c_str(), stdout); });
}

}  // namespace kplan::cli
