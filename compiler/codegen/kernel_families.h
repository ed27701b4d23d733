#pragma once
// The registry of kernel families: for each template in kernels_templates/, its header, the
// device function the generated entry calls, its template parameters in order, and its launch
// signature. This table is the one place that must agree with the template headers; the codegen
// tests compile every family, so a mismatch fails there.
#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

struct ParamSpec {
  std::string name;     // template parameter name, e.g. "K", "X_DT"
  std::string tag;      // short prefix in readable ids, e.g. "k" -> "k256"
  bool is_dtype = false;  // value is an ElemType code, printed as "f32" / "bf16"
  bool is_tuning = false; // chosen by heuristics.cc unless given
};

struct FamilySpec {
  std::string name;      // "matmul"
  std::string header;    // "matmul.cuh"
  std::string function;  // "kp::matmul"
  std::vector<ParamSpec> params;      // template order
  std::vector<KernelArg> signature;   // launch arguments in order
  // Template parameter holding the block size: "THREADS" (threads) or "WARPS" (32 threads each).
  std::string block_param;
};

// Every family, in a stable order.
const std::vector<FamilySpec>& kernel_families();
// Throws kplan::Error naming the family when it does not exist.
const FamilySpec& kernel_family(std::string_view name);

}  // namespace kplan::codegen
