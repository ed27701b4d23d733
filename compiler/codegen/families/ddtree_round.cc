#include "compiler/codegen/families/ddtree_round.h"

namespace kplan::codegen {
namespace {

LaunchDims one_block(const KernelSource& k, const LaunchShape&) { return block_of(k); }

// round_tree keeps its frontier and nodes in static shared memory (48 KiB at most).
void check_tree(const ParamValues& p) {
  require(p.at("T") >= 1 && p.at("T") <= 512, "round_tree", "T must be in [1, 512]");
  require(p.at("NMAX") >= p.at("T") && p.at("NMAX") <= 512, "round_tree", "NMAX must be in [T, 512]");
  require(p.at("K") >= 1 && p.at("D") >= 1, "round_tree", "K and D must be positive");
}

void check_walk(const ParamValues& p) {
  require(p.at("T") >= 1 && p.at("T") <= 512, "round_walk", "T must be in [1, 512]");
}

void check_sample(const ParamValues& p) {
  require(p.at("T") >= 1 && p.at("T") <= 512, "round_sample", "T must be in [1, 512]");
  require(p.at("V") >= 1, "round_sample", "V must be positive");
  require(p.at("THREADS") % 32 == 0 && p.at("THREADS") <= 1024, "round_sample", "THREADS must be whole warps, <= 1024");
}

LaunchDims row_blocks(const KernelSource& k, const LaunchShape&) {
  LaunchDims d = block_of(k);
  d.grid = {static_cast<uint32_t>(kernel_param(k, "T")), 1, 1};
  return d;
}

void check_draft_inputs(const ParamValues& p) {
  require(p.at("BLOCK") >= 1 && p.at("BLOCK") <= p.at("THREADS"), "round_draft_inputs", "BLOCK must be in [1, THREADS]");
}

}  // namespace

namespace round_draft_inputs {
const Family& family() {
  static const Family f{
      .name = "round_draft_inputs",
      .header = "ddtree_round.cuh",
      .function = "kp::round_draft_inputs",
      .params = {dim_param("BLOCK", "n"), dim_param("MASK", "m"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check_draft_inputs,
      .geometry = one_block,
  };
  return f;
}
}  // namespace round_draft_inputs

namespace round_tree {
const Family& family() {
  static const Family f{
      .name = "round_tree",
      .header = "ddtree_round.cuh",
      .function = "kp::round_tree",
      .params = {dim_param("T", "t"), dim_param("K", "k"), dim_param("D", "d"), dim_param("NMAX", "n"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check_tree,
      .geometry = one_block,
  };
  return f;
}
}  // namespace round_tree

namespace round_sample {
const Family& family() {
  static const Family f{
      .name = "round_sample",
      .header = "ddtree_round.cuh",
      .function = "kp::round_sample",
      .params = {dim_param("T", "t"), dim_param("V", "v"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check_sample,
      .geometry = row_blocks,
  };
  return f;
}
}  // namespace round_sample

namespace round_walk {
const Family& family() {
  static const Family f{
      .name = "round_walk",
      .header = "ddtree_round.cuh",
      .function = "kp::round_walk",
      .params = {dim_param("T", "t"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check_walk,
      .geometry = one_block,
  };
  return f;
}
}  // namespace round_walk

KernelSource round_draft_inputs_kernel(int64_t block, int64_t mask, std::string_view arch) {
  return instantiate(round_draft_inputs::family(), {{"BLOCK", block}, {"MASK", mask}}, arch);
}

KernelSource round_tree_kernel(int64_t tokens, int64_t k, int64_t rows, int64_t max_tokens, std::string_view arch) {
  return instantiate(round_tree::family(), {{"T", tokens}, {"K", k}, {"D", rows}, {"NMAX", max_tokens}}, arch);
}

KernelSource round_sample_kernel(int64_t tokens, int64_t vocab, std::string_view arch) {
  return instantiate(round_sample::family(), {{"T", tokens}, {"V", vocab}}, arch);
}

KernelSource round_walk_kernel(int64_t tokens, std::string_view arch) {
  return instantiate(round_walk::family(), {{"T", tokens}}, arch);
}

}  // namespace kplan::codegen
