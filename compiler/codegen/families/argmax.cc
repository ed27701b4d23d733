#include "compiler/codegen/families/argmax.h"

namespace kplan::codegen::argmax {
namespace {

void check(const ParamValues& p) {
  require(p.at("CLUSTER") >= 1 && p.at("CLUSTER") <= 8, "argmax", "CLUSTER (blocks per row) must be 1..8 (a portable cluster)");
}

// grid (CLUSTER, rows): a row's blocks form one cluster (sampling.cuh).
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);
  const uint32_t c = static_cast<uint32_t>(kernel_param(k, "CLUSTER"));
  d.grid = {c, static_cast<uint32_t>(s.rows), 1};
  if (c > 1) d.cluster = {c, 1, 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "argmax",
      .header = "sampling.cuh",
      .function = "kp::argmax",
      .params = {dim_param("V", "v"), dtype_param("X_DT", "x"), tuning_param("THREADS", "b"), tuning_param("CLUSTER", "c")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::argmax

namespace kplan::codegen {

KernelSource argmax_kernel(int64_t vocab, ElemType logits, std::string_view arch) {
  return instantiate(argmax::family(), {{"V", vocab}, {"X_DT", dtype_code(logits)}}, arch);
}

}  // namespace kplan::codegen
