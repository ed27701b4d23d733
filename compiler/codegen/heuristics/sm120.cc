// Blackwell workstation (sm_120: RTX PRO 6000; 188 SMs, 100 KiB shared memory per SM, GDDR7).
// Nothing has been measured on it yet, so it starts from Hopper's table; an entry replaced
// here is one a device run on sm_120 justified (record it in bench/RESULTS.md).
#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::codegen {

const TuningTable& sm120_tuning() {
  static const TuningTable table = [] {
    TuningTable t = sm90_tuning();
    return t;
  }();
  return table;
}

}  // namespace kplan::codegen
