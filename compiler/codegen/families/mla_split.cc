#include "compiler/codegen/families/mla_split.h"

#include <algorithm>

#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::codegen {

int64_t mla_split_smem_bytes(int64_t kv_lora, int64_t rope, int64_t keys_per_tile) { return keys_per_tile * (kv_lora + rope) * 4; }

int64_t mla_split_count(const KernelSource& partial, int64_t max_context, int64_t n_tokens, std::string_view arch) {
  const int64_t tokens = std::max<int64_t>(n_tokens, 1);
  const int64_t groups = ceil_div(kernel_param(partial, "HEADS"), kernel_param(partial, "WARPS"));
  const int64_t by_keys = ceil_div(std::max<int64_t>(max_context, 0) + tokens, mla_split_min_keys(arch));
  const int64_t by_grid = std::max<int64_t>(1, mla_split_blocks(arch) / (tokens * groups));
  const int64_t splits = std::clamp<int64_t>(by_keys, 1, by_grid);
  require(splits <= kMlaMaxSplits, "mla_split_partial", "more splits than the combine's shared memory holds");
  return splits;
}

uint64_t mla_split_workspace_bytes(const KernelSource& partial, int64_t max_context, int64_t max_tokens, std::string_view arch) {
  int64_t rows = 0;  // the largest n_tokens * n_splits of any bucket
  for (int64_t t = 1; t <= max_tokens; ++t) rows = std::max(rows, t * mla_split_count(partial, max_context, t, arch));
  return 4 * static_cast<uint64_t>(rows * kernel_param(partial, "HEADS") * (kernel_param(partial, "C") + 2));
}

namespace mla_split_partial {
namespace {

void check(const ParamValues& p) {
  require(p.at("KT") >= 1 && p.at("KT") <= 32, "mla_split_partial", "KT (keys per tile) must be 1..32");
  require(p.at("WARPS") >= 1 && p.at("WARPS") <= 32, "mla_split_partial", "WARPS (heads per block) must be 1..32");
  require(mla_split_smem_bytes(p.at("C"), p.at("R"), p.at("KT")) <= 224 * 1024, "mla_split_partial",
          "KT staged rows of C + R f32 exceed 224 KiB of shared memory");
}

// grid (n_splits = the launch's batch, tokens, head groups of WARPS heads), the staged tile in
// dynamic shared memory.
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);
  d.grid = {static_cast<uint32_t>(s.batch), static_cast<uint32_t>(s.rows), ceil_div(kernel_param(k, "HEADS"), kernel_param(k, "WARPS"))};
  d.smem_bytes = static_cast<uint32_t>(mla_split_smem_bytes(kernel_param(k, "C"), kernel_param(k, "R"), kernel_param(k, "KT")));
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_split_partial",
      .header = "mla_split.cuh",
      .function = "kp::mla_split_partial",
      .params = {dim_param("HEADS", "h"), dim_param("C", "c"), dim_param("R", "r"), dtype_param("Q_DT", "q"), dtype_param("KV_DT", "kv"),
                 tuning_param("WARPS", "w"), tuning_param("KT", "kt")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace mla_split_partial

namespace mla_split_combine {
namespace {

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one block per (head, token)
  d.grid = {static_cast<uint32_t>(kernel_param(k, "HEADS")), static_cast<uint32_t>(s.rows), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_split_combine",
      .header = "mla_split.cuh",
      .function = "kp::mla_split_combine",
      .params = {dim_param("HEADS", "h"), dim_param("C", "c"), dtype_param("O_DT", "o"), tuning_param("THREADS", "t")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = geometry,
  };
  return f;
}

}  // namespace mla_split_combine

KernelSource mla_split_partial_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv, std::string_view arch) {
  return instantiate(mla_split_partial::family(),
                     {{"HEADS", heads}, {"C", kv_lora}, {"R", rope}, {"Q_DT", dtype_code(q)}, {"KV_DT", dtype_code(kv)}}, arch);
}

KernelSource mla_split_combine_kernel(int64_t heads, int64_t kv_lora, ElemType out, std::string_view arch) {
  return instantiate(mla_split_combine::family(), {{"HEADS", heads}, {"C", kv_lora}, {"O_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
