#include "schemas/plan_arch.h"

#include <cstdlib>

#include "ir/support/error.h"

namespace kplan::plan {
namespace {

// "sm_90" -> 90, "sm_90a" -> 90 with suffix "a"; -1 when not an sm_ name.
int arch_number(const std::string& arch, std::string* suffix) {
  if (arch.rfind("sm_", 0) != 0) return -1;
  size_t i = 3;
  int v = 0;
  while (i < arch.size() && arch[i] >= '0' && arch[i] <= '9') v = v * 10 + (arch[i++] - '0');
  if (i == 3) return -1;
  if (suffix) *suffix = arch.substr(i);
  return v;
}

}  // namespace

std::string arch_name(int major, int minor) {
  return "sm_" + std::to_string(major * 10 + minor);
}

std::string select_arch(const Plan& plan, const std::string& device_arch, const std::string& source) {
  int dev = arch_number(device_arch, nullptr);
  std::string best;
  int best_num = -1;
  for (const std::string& a : plan.header.archs) {
    if (a == device_arch) return a;
    std::string suffix;
    int n = arch_number(a, &suffix);
    // Arch-specific variants (sm_90a) run only on exactly that arch.
    if (n < 0 || !suffix.empty() || dev < 0) continue;
    if (n / 10 == dev / 10 && n <= dev && n > best_num) {
      best = a;
      best_num = n;
    }
  }
  if (!best.empty()) return best;
  if (plan.header.archs.empty())
    throw Error(source + ": plan has no GPU kernels (it runs on the CPU reference); compile it with `kplan compile -o "
                "PLAN --arch " + device_arch + "` for this GPU");
  std::string have;
  for (const std::string& a : plan.header.archs) have += (have.empty() ? "" : ", ") + a;
  throw Error(source + ": plan has " + have + " kernels only; this GPU is " + device_arch +
              ": recompile with --arch " + device_arch);
}

}  // namespace kplan::plan
