#include "compiler/codegen/families/moe_grouped.h"

#include <algorithm>

#include "ir/support/int4_frag.h"

namespace kplan::codegen {

int64_t moe_expert_slots(int64_t experts, int64_t top_k, int64_t n_tokens) { return std::min(experts, n_tokens * top_k); }

int64_t moe_smem_bytes(int64_t reduction, int64_t pairs, int64_t mma, int64_t warps, int64_t ring, int64_t xb, int64_t tma) {
  const int64_t c_fragments = mma >= 3 ? reduction / 32 * ceil_div(pairs, 8) * 64 : 0;  // MMA 3, 4
  const int64_t rings = ring >= 2 ? warps * ring * kMoeRingStageBytes : 0;               // after them (moe_ring_buffers)
  const int64_t barriers = ring >= 2 && tma == 1 ? warps * ring * 8 : 0;                  // after the rings
  return pairs * ceil_div(reduction, 1024) * 1024 * (xb == 1 ? 2 : 4) + c_fragments + rings + barriers;
}

namespace {

// MMA 1 (INT4 only): the tensor-core path. A warp's rows are m-tiles of 16 A rows (gate/up: 8
// gate + the same 8 up rows, so ROWS is 8 or 16; down: 16 rows, so ROWS is 16 or 32), the
// chunk's pairs the n-tiles' columns (8 each: NT up to 16, two n-tiles), and each warp holds
// two 1 KiB weight transposition buffers in static shared memory (moe_stream_tiles_mma).
// RING >= 2 replaces them with the warps' rings of RING stages in dynamic shared memory.
// W_LAYOUT 1 (ir/support/int4_frag.h) loads the fragment words directly: no buffers.
int64_t moe_mma_tbuf_bytes(const ParamValues& p) {
  return p.at("MMA") >= 1 && p.at("RING") == 0 && p.at("W_LAYOUT") == 0 ? p.at("WARPS") * 2 * 1024 : 0;
}

// `rows`: one expert's rows of the matrix the kernel streams, `k` its reduction dim.
void check_experts(const ParamValues& p, const char* family, int64_t rows, int64_t k, int64_t mats) {
  require(p.at("E") >= 1 && p.at("TOPK") >= 1 && p.at("TOPK") <= p.at("E"), family, "needs 1 <= TOPK <= E");
  require(p.at("E") <= 65535, family, "E above 65535 does not fit grid.y");
  if (p.at("W_FMT") == 1) require(k % 32 == 0, family, "INT4 experts need a reduction dim that is a multiple of 32");
  require(p.at("MMA") >= 0 && p.at("MMA") <= 4, family,
          "MMA must be 0 (CUDA cores), 1 or 2 (tensor cores: scales shared by shuffles / loaded by each lane), 3 or 4 (2 or 1 with "
          "the dequantisation's subtraction moved into the MMA's C)");
  if (p.at("MMA") >= 1) {
    require(p.at("W_FMT") == 1, family, "MMA 1 is the INT4 path");
    const int64_t m_rows = 16 / mats;  // rows of one matrix in an m-tile
    require(p.at("ROWS") == m_rows || p.at("ROWS") == 2 * m_rows, family, mats == 2 ? "MMA 1: ROWS must be 8 or 16" : "MMA 1: ROWS must be 16 or 32");
    require(p.at("NT") >= 1 && p.at("NT") <= 16, family, "MMA 1: NT must be 1..16");
  } else {
    require(p.at("ROWS") >= 1 && p.at("ROWS") <= 8, family, "ROWS must be 1..8");
    require(p.at("NT") >= 1 && p.at("NT") <= 8, family, "NT must be 1..8");
  }
  require(p.at("XB") == 0 || p.at("XB") == 1, family, "XB must be 0 (activations as bf16 hi + lo) or 1 (rounded to bf16)");
  require(p.at("XB") == 0 || p.at("MMA") >= 1, family, "XB 1 is the tensor-core path's (MMA 1..4)");
  require(p.at("PF") >= 0 && p.at("PF") <= 3, family, "PF (steps of loads in flight ahead of the math) must be 0..3");
  const int64_t ring = p.at("RING");
  require(ring == 0 || (ring >= 2 && ring <= 8), family, "RING (shared-memory stages a warp) must be 0 (the PF register ring) or 2..8");
  if (ring >= 2) {
    require(p.at("MMA") >= 1, family, "RING is the tensor-core path's (MMA 1..4)");
    require(p.at("ROWS") == 16 / mats, family, mats == 2 ? "RING: ROWS must be 8 (one m-tile a warp)" : "RING: ROWS must be 16 (one m-tile a warp)");
    require(k % 256 == 0, family, "RING needs a reduction dim that is a multiple of 256 (whole steps of 8 groups)");
    require(p.at("PF") == 0, family, "RING replaces PF's register ring: PF must be 0");
  }
  const int64_t layout = p.at("W_LAYOUT");
  require(layout == 0 || layout == 1, family, "W_LAYOUT must be 0 (the checkpoint's rows) or 1 (ir/support/int4_frag.h)");
  if (layout == 1) {
    require(p.at("W_FMT") == 1 && p.at("MMA") >= 1, family,
            "W_LAYOUT 1 is the tensor-core path's (MMA 1..4); compile with KPLAN_MOE_FRAG=0 for the CUDA-core path");
    require(int4_frag::fits(rows, k, 32), family,
            "W_LAYOUT 1 needs whole octets of rows and a reduction dim that is a multiple of 128");
  }
  const int64_t tma = p.at("TMA");
  require(tma == 0 || tma == 1, family, "TMA must be 0 (a RING's copies by cp.async) or 1 (by the copy engine, cp.async.bulk)");
  if (tma == 1) {
    require(ring >= 2 && layout == 1, family, "TMA 1 copies the int4_frag ring's steps: it needs RING >= 2 and W_LAYOUT 1");
    require(rows % (p.at("WARPS") * p.at("ROWS")) == 0, family,
            "TMA 1 needs whole row tiles (WARPS x ROWS rows dividing an expert's rows): its copies write no zeros");
  }
  require(p.at("BLOCKS") >= 1, family, "BLOCKS must be >= 1");
  const int64_t gpf = p.at("GPF");
  require(gpf >= 0 && gpf <= 64, family, "GPF (KiB of a warp's first tile asked of L2 before the PDL wait) must be 0..64");
  require(gpf == 0 || layout == 1, family, "GPF is the int4_frag experts' prologue: it needs W_LAYOUT 1");
  // The staged activations, the MMA transposition buffers or rings and the block's static few
  // hundred bytes within sm_90's 227 KiB.
  require(moe_smem_bytes(k, p.at("NT"), p.at("MMA"), p.at("WARPS"), ring, p.at("XB"), tma) + moe_mma_tbuf_bytes(p) <= 224 * 1024, family,
          "NT staged rows of the reduction dim (and the warps' RING stages) exceed 224 KiB of shared memory");
}

// grid (blocks per expert, expert slots, pair chunk blocks), one block of WARPS warps, ROWS rows
// per warp; block (x, y, z) takes row tiles x, x + grid.x, ... (moe_stream_tiles) of pair chunks
// z, z + grid.z, ... of its expert. The grid is sized for the experts a step is expected to
// touch, an underestimate (more blocks than needed, not fewer): TOPK * ceil(sqrt(n_tokens))
// (tree tokens share experts; the K2.6 slice's steps touched 8, 15, 28.5, 45, 59, 95.5 at 1, 2,
// 4, 8, 16, 64 tokens), their pair chunks (NT pairs each) over grid.z (at most 8), then BLOCKS
// blocks over those, at most kMaxTilesPerBlock tiles a block (its prologue amortised, the grid
// still deep), the tiles dealt evenly (K2.6 at 1 token: 4 of gate/up's 128 tiles a block, 32
// blocks an expert). The same with MMA 1, whose tiles are larger (ROWS 8 x 8 warps: gate/up's 32
// tiles of 64 rows, one a block at 1 token) and whose NT (up to 16) makes fewer chunks.
constexpr int64_t kMaxTilesPerBlock = 8;

// `tile_rows`: the rows a block's warps stream side by side (WARPS x ROWS; gate/up's KS parts: WARPS / KS x ROWS).
LaunchDims expert_grid(const KernelSource& k, const LaunchShape& s, int64_t rows, int64_t reduction, int64_t tile_rows) {
  LaunchDims d = block_of(k);
  const int64_t top_k = kernel_param(k, "TOPK"), nt = kernel_param(k, "NT");
  const int64_t tokens = std::max<int64_t>(s.rows, 1);
  const int64_t slots = moe_expert_slots(kernel_param(k, "E"), top_k, tokens);
  const int64_t tiles = ceil_div(rows, tile_rows);
  int64_t root = 1;
  while (root * root < tokens) ++root;
  const int64_t expected = std::min(slots, top_k * root);
  const int64_t chunks = std::clamp<int64_t>(ceil_div(ceil_div(tokens * top_k, expected), nt), 1, 8);
  const int64_t wanted = std::clamp<int64_t>(
      std::max<int64_t>(ceil_div(kernel_param(k, "BLOCKS"), expected * chunks), ceil_div(tiles, kMaxTilesPerBlock)), 1, tiles);
  const int64_t per_block = ceil_div(tiles, wanted);  // tiles per block, then as few blocks as that needs
  d.grid = {ceil_div(tiles, per_block), static_cast<uint32_t>(slots), static_cast<uint32_t>(chunks)};
  d.smem_bytes = static_cast<uint32_t>(
      moe_smem_bytes(reduction, nt, kernel_param(k, "MMA"), kernel_param(k, "WARPS"), kernel_param(k, "RING"), kernel_param(k, "XB"),
                     kernel_param(k, "TMA")));
  return d;
}

}  // namespace

namespace moe_grouped_gate_up {
namespace {

void check(const ParamValues& p) {
  check_experts(p, "moe_grouped_gate_up", p.at("I"), p.at("H"), 2);
  const int64_t ks = p.at("KS");
  require(ks == 0 || ks == 1 || ks == 2 || ks == 4, "moe_grouped_gate_up", "KS (K parts a tile's rows are split into) must be 0 or 1 (none), 2 or 4");
  if (ks > 1) {
    require(p.at("TMA") == 1, "moe_grouped_gate_up", "KS > 1 splits the copy engine's ring (TMA 1) only");
    require(p.at("WARPS") % ks == 0 && p.at("H") / 256 % ks == 0, "moe_grouped_gate_up",
            "KS must divide WARPS and the reduction's steps of 256 columns");
    require(p.at("I") % (p.at("WARPS") / ks * p.at("ROWS")) == 0, "moe_grouped_gate_up",
            "KS: whole row tiles of WARPS / KS x ROWS rows");
  }
  require(p.at("ROUTE") >= 0 && p.at("ROUTE") <= 64, "moe_grouped_gate_up", "ROUTE (tokens the launch routes itself) must be 0..64");
  require(p.at("ROUTE") == 0 || p.at("E") <= 1024, "moe_grouped_gate_up", "ROUTE: the router's warp holds at most 1024 experts");
  require(p.at("RNORM") == 0 || p.at("RNORM") == 1, "moe_grouped_gate_up", "RNORM (norm_topk_prob) must be 0 or 1");
}
// A launch that routes its step itself takes no more tokens than it has shared memory for.
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  const int64_t route = kernel_param(k, "ROUTE");
  require(route == 0 || s.rows <= route, "moe_grouped_gate_up",
          "a step of " + std::to_string(s.rows) + " tokens is past ROUTE " + std::to_string(route) + " (the tokens the launch routes)");
  const int64_t parts = std::max<int64_t>(kernel_param(k, "KS"), 1);  // a tile is WARPS / KS warps' rows
  return expert_grid(k, s, kernel_param(k, "I"), kernel_param(k, "H"), kernel_param(k, "WARPS") / parts * kernel_param(k, "ROWS"));
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "moe_grouped_gate_up",
      .header = "moe_grouped.cuh",
      .function = "kp::moe_grouped_gate_up",
      .prologue = "kp::moe_grouped_gate_up_prefetch",
      .params = {dim_param("H", "h"), dim_param("I", "i"), dim_param("E", "e"), dim_param("TOPK", "k"), dim_param("W_FMT", "wf"),
                 dtype_param("X_DT", "x"), tuning_param("WARPS", "w"), tuning_param("ROWS", "r"), tuning_param("NT", "nt"),
                 tuning_param("PF", "pf"), tuning_param("BLOCKS", "b"), tuning_param("MMA", "mma"), tuning_param("RING", "ring"),
                 dim_param("ROUTE", "route"), dim_param("RNORM", "rn"), dim_param("W_LAYOUT", "wl"), tuning_param("XB", "xb"),
                 tuning_param("TMA", "tma"), optional_tuning_param("KS", "ks"), optional_tuning_param("GPF", "gpf"),
                 min_blocks_param("MINB", "mb")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace moe_grouped_gate_up

namespace moe_grouped_down {
namespace {

void check(const ParamValues& p) { check_experts(p, "moe_grouped_down", p.at("H"), p.at("I"), 1); }
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  return expert_grid(k, s, kernel_param(k, "H"), kernel_param(k, "I"), kernel_param(k, "WARPS") * kernel_param(k, "ROWS"));
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "moe_grouped_down",
      .header = "moe_grouped.cuh",
      .function = "kp::moe_grouped_down",
      .prologue = "kp::moe_grouped_down_prefetch",
      .params = {dim_param("H", "h"), dim_param("I", "i"), dim_param("E", "e"), dim_param("TOPK", "k"), dim_param("W_FMT", "wf"),
                 tuning_param("WARPS", "w"), tuning_param("ROWS", "r"), tuning_param("NT", "nt"),
                 tuning_param("PF", "pf"), tuning_param("BLOCKS", "b"), tuning_param("MMA", "mma"), tuning_param("RING", "ring"),
                 dim_param("W_LAYOUT", "wl"), tuning_param("XB", "xb"), tuning_param("TMA", "tma"), optional_tuning_param("GPF", "gpf"),
                 min_blocks_param("MINB", "mb")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace moe_grouped_down

namespace moe_combine {
namespace {

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one thread per output column, one block row per token
  d.grid = {ceil_div(kernel_param(k, "H"), kernel_param(k, "THREADS")), static_cast<uint32_t>(std::max<int64_t>(s.rows, 1)), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "moe_combine",
      .header = "moe_grouped.cuh",
      .function = "kp::moe_combine",
      .params = {dim_param("H", "h"), dim_param("TOPK", "k"), dtype_param("Y_DT", "y"), dim_param("ACC", "acc"), tuning_param("THREADS", "t")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = geometry,
  };
  return f;
}

}  // namespace moe_combine

KernelSource moe_grouped_gate_up_kernel(int64_t hidden, int64_t inter, int64_t experts, int64_t top_k, bool int4, ElemType x,
                                        std::string_view arch, const ParamValues& tuning, const MoeRouteFold& route, int64_t w_layout) {
  ParamValues p = tuning;
  p.insert({{"H", hidden}, {"I", inter}, {"E", experts}, {"TOPK", top_k}, {"W_FMT", int4 ? 1 : 0}, {"X_DT", dtype_code(x)},
            {"ROUTE", route.max_tokens}, {"RNORM", route.max_tokens > 0 && route.norm ? 1 : 0}, {"W_LAYOUT", w_layout}});
  return instantiate(moe_grouped_gate_up::family(), p, arch);
}

KernelSource moe_grouped_down_kernel(int64_t hidden, int64_t inter, int64_t experts, int64_t top_k, bool int4, std::string_view arch,
                                     const ParamValues& tuning, int64_t w_layout) {
  ParamValues p = tuning;
  p.insert({{"H", hidden}, {"I", inter}, {"E", experts}, {"TOPK", top_k}, {"W_FMT", int4 ? 1 : 0}, {"W_LAYOUT", w_layout}});
  return instantiate(moe_grouped_down::family(), p, arch);
}

KernelSource moe_combine_kernel(int64_t hidden, int64_t top_k, ElemType y, bool accumulate, std::string_view arch) {
  return instantiate(moe_combine::family(), {{"H", hidden}, {"TOPK", top_k}, {"Y_DT", dtype_code(y)}, {"ACC", accumulate ? 1 : 0}}, arch);
}

}  // namespace kplan::codegen
