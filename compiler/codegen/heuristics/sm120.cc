// Blackwell workstation (sm_120: RTX PRO 6000; 188 SMs, 100 KiB shared memory per SM, GDDR7).
// Nothing has been measured on it yet, so it starts from Hopper's table; an entry replaced
// here is one a device run on sm_120 justified (record it in bench/RESULTS.md).
#include "compiler/codegen/heuristics/heuristics.h"

#include "compiler/codegen/families/moe_grouped.h"

namespace kplan::codegen {

const TuningTable& sm120_tuning() {
  static const TuningTable table = [] {
    TuningTable t = sm90_tuning();
    // The expert-grouped MoE kernels: Hopper's rows and pair chunks (64 K registers per SM are the
    // same; with 188 SMs at ~1.8 TB/s the bytes in flight per SM are ample), the grid sized for
    // 188 SMs, and gate/up's staged pairs capped so two blocks fit sm_120's 100 KiB per SM
    // (K2.6's H = 7168: 28 KiB a pair, so NT 1; down's I = 2048: 8 KiB a pair).
    // The register ring (RING 0): Hopper's three stages of 16 warps would not fit beside the rows.
    // PF 1 with XB too: Hopper's XB tuning takes PF 2, not measured on sm_120 (whose 188 SMs
    // keep more bytes in flight at PF 1 already).
    t["moe_grouped_gate_up"] = [](ParamValues& p) {
      p.try_emplace("RING", 0);
      if (p.at("RING") == 0) p.try_emplace("PF", 1);
      p.try_emplace("NT", moe_smem_bytes(p.at("H"), 2) <= 48 * 1024 ? 2 : 1);
      p.try_emplace("BLOCKS", 2 * 188);
      sm90_tuning().at("moe_grouped_gate_up")(p);
    };
    t["moe_grouped_down"] = [](ParamValues& p) {
      p.try_emplace("RING", 0);
      if (p.at("RING") == 0) p.try_emplace("PF", 1);
      p.try_emplace("NT", moe_smem_bytes(p.at("I"), 3) <= 48 * 1024 ? 3 : 1);
      p.try_emplace("BLOCKS", 2 * 188);
      sm90_tuning().at("moe_grouped_down")(p);
    };
    // 188 SMs of at most 48 resident warps (1536 threads): the same weight stream, sized for
    // the wider grid; GDDR7's lower bandwidth needs fewer bytes in flight per SM.
    t["matmul"] = [](ParamValues& p) { matmul_tiling(p, 188, 24, 4); };
    t["matmul_int4"] = [](ParamValues& p) { matmul_int4_tiling(p, 188, 24); };
    t["matmul_siblings"] = [](ParamValues& p) { matmul_siblings_tiling(p, 188, 24); };
    // Split-context MLA: tiles of 16 keys (36 KiB at K2.6 width), so two blocks fit 100 KiB; the
    // CUDA-core partial (the all-heads MMA 2 / 3 stage 189+ KiB at K2.6 width: past 99 KiB a block).
    t["mla_split_partial"] = [](ParamValues& p) {
      p.try_emplace("MMA", 0);
      p.try_emplace("KT", 16);
      sm90_tuning().at("mla_split_partial")(p);
    };
    return t;
  }();
  return table;
}

}  // namespace kplan::codegen
