#include "compiler/codegen/heuristics/heuristics.h"

#include <algorithm>
#include <charconv>

#include "ir/support/error.h"

namespace kplan::codegen {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t threads_for(int64_t work) { return std::clamp<int64_t>(round_up(work, 32), 32, 256); }
int64_t row_threads(int64_t d) { return std::clamp<int64_t>(round_up((d + 15) / 16, 32), 128, 1024); }

const TuningTable& tuning_for(std::string_view arch) {
  int major = 0;
  if (arch.size() > 3 && arch.substr(0, 3) == "sm_") {
    const std::string_view digits = arch.substr(3);
    std::from_chars(digits.data(), digits.data() + digits.size(), major);
  }
  if (major == 0) throw Error("codegen: no tuning for arch '" + std::string(arch) + "' (expected sm_NN)");
  return major >= 100 ? sm120_tuning() : sm90_tuning();
}

void choose_tuning(const Family& family, std::string_view arch, ParamValues& params) {
  const TuningTable& table = tuning_for(arch);
  auto it = table.find(family.name);
  if (it == table.end()) throw Error("codegen: heuristics for " + std::string(arch) + " have no entry for kernel family " + family.name);
  it->second(params);
}

}  // namespace kplan::codegen
