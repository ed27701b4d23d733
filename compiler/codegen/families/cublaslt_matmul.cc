#include "compiler/codegen/families/cublaslt_matmul.h"

namespace kplan::codegen::cublaslt_matmul {
namespace {

void check(const ParamValues& p) {
  require(p.at("X_DT") == dtype_code(ElemType::BF16), "cublaslt_matmul", "x must be bf16 (cuBLASLt multiplies A and B of one type)");
  require(p.at("ACC") == 0 || p.at("ACC") == 1, "cublaslt_matmul", "ACC must be 0 or 1");
  require(p.at("K") > 0 && p.at("N") > 0, "cublaslt_matmul", "K and N must be positive");
  // cuBLASLt wants 16-byte aligned leading dimensions for its tensor-core kernels.
  require(p.at("K") % 8 == 0, "cublaslt_matmul", "K must be a multiple of 8, got " + std::to_string(p.at("K")));
}

// No grid: the library picks its own kernels and launches.
LaunchDims geometry(const KernelSource&, const LaunchShape&) { return {}; }

}  // namespace

const Family& family() {
  static const Family f{
      .name = "cublaslt_matmul",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("ACC", "acc")},
      .signature = signature_of<Args>(),
      .check = check,
      .geometry = geometry,
      .library = "cublaslt",
  };
  return f;
}

}  // namespace kplan::codegen::cublaslt_matmul

namespace kplan::codegen {

KernelSource cublaslt_matmul_call(int64_t k, int64_t n, ElemType y, bool accumulate, std::string_view arch) {
  return instantiate(cublaslt_matmul::family(),
                     {{"K", k}, {"N", n}, {"X_DT", dtype_code(ElemType::BF16)}, {"Y_DT", dtype_code(y)}, {"ACC", accumulate ? 1 : 0}}, arch);
}

}  // namespace kplan::codegen
