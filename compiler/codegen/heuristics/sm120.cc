// Blackwell workstation (sm_120: RTX PRO 6000; 188 SMs, 100 KiB shared memory per SM, GDDR7).
// Nothing has been measured on it yet, so it starts from Hopper's table; an entry replaced
// here is one a device run on sm_120 justified (record it in bench/RESULTS.md).
#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::codegen {

const TuningTable& sm120_tuning() {
  static const TuningTable table = [] {
    TuningTable t = sm90_tuning();
    // The expert-grouped MoE kernels keep Hopper's values: their <= 12 KiB of static shared memory
    // per block fits sm_120's 100 KiB per SM many times over, and 64 K registers per SM are the same;
    // with 188 SMs at ~1.8 TB/s the bytes in flight per SM that Hopper's values give are ample,
    // and 1 token still makes ~5 gate/up blocks per SM (K2.6: 128 row tiles x 8 experts).
    return t;
  }();
  return table;
}

}  // namespace kplan::codegen
