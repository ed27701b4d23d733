#pragma once
// Typed launch arguments. A family's `Args` struct lists its kernel arguments once, as fields:
//
//   struct Args {
//     KPLAN_PTR(x);        // what x points at
//     KPLAN_I32(n_rows);   // ...
//     KPLAN_F32(eps);
//   };
//
// Each field's type carries its name and C kind, so the same struct generates the extern "C"
// entry's parameter list (signature_of<Args>(), in declaration order) and the launch's argument
// list (launch_args(args)). Call sites fill it with designated initialisers,
// `rms_norm::Args{.x = ..., .weight = ..., ...}`: a field given out of order, under the wrong
// name, of the wrong kind (an int for a pointer) or not at all is a compile error (the field
// types have no default constructor), where a positional std::vector<LaunchArg> compiled silently.
#include <array>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "ir/support/error.h"
#include "schemas/plan_model.h"

namespace kplan::codegen {

// A string literal usable as a template argument (the field's name).
template <size_t N>
struct FixedName {
  char text[N];
  constexpr FixedName(const char (&s)[N]) {
    for (size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

// A device pointer: a buffer slot, a weight, a step input (plan::LaunchArg of those kinds) or a
// tensor-map description (LaunchArg::tensor_map, encoded by the runtime at load).
template <FixedName Name>
struct PtrArg {
  static constexpr ArgKind kind = ArgKind::DevicePtr;
  static constexpr std::string_view name = Name.view();
  plan::LaunchArg value;
  PtrArg(const plan::LaunchArg& a) : value(a) {
    if (a.kind == plan::ArgKind::I32 || a.kind == plan::ArgKind::I64 || a.kind == plan::ArgKind::F32) {
      throw Error("codegen: kernel argument " + std::string(name) + " is a pointer, got a scalar");
    }
  }
};

// An int32 scalar; the value is range-checked when the launch is built.
template <FixedName Name>
struct I32Arg {
  static constexpr ArgKind kind = ArgKind::I32;
  static constexpr std::string_view name = Name.view();
  plan::LaunchArg value;
  I32Arg(int64_t v) : value(plan::LaunchArg::i32(static_cast<int32_t>(v))) {
    if (v < INT32_MIN || v > INT32_MAX) throw Error("codegen: kernel argument " + std::string(name) + " = " + std::to_string(v) + " does not fit an int32");
  }
  template <std::floating_point T>
  I32Arg(T) = delete;  // a float for an int argument is a mistake, not a conversion
};

template <FixedName Name>
struct F32Arg {
  static constexpr ArgKind kind = ArgKind::F32;
  static constexpr std::string_view name = Name.view();
  plan::LaunchArg value;
  F32Arg(double v) : value(plan::LaunchArg::f32(static_cast<float>(v))) {}
  template <std::integral T>
  F32Arg(T) = delete;
};

// A TMA tensor map: the description (plan::TensorMapDesc) travels with the launch, the runtime
// encodes it at load (runtime/gpu/launch_resolve.h); the kernel takes it by value.
template <FixedName Name>
struct TensorMapArg {
  static constexpr ArgKind kind = ArgKind::TensorMap;
  static constexpr std::string_view name = Name.view();
  plan::TensorMapDesc value;
  TensorMapArg(plan::TensorMapDesc d) : value(std::move(d)) {}
};

#define KPLAN_PTR(field) ::kplan::codegen::PtrArg<#field> field
#define KPLAN_TMAP(field) ::kplan::codegen::TensorMapArg<#field> field
#define KPLAN_I32(field) ::kplan::codegen::I32Arg<#field> field
#define KPLAN_F32(field) ::kplan::codegen::F32Arg<#field> field

namespace args_detail {

// Converts to any field type; only named in unevaluated contexts (field counting).
struct AnyField {
  template <class T>
  operator T() const;
};

template <class T, size_t... I>
constexpr bool brace_constructible(std::index_sequence<I...>) {
  return requires { T{(static_cast<void>(I), AnyField{})...}; };
}

// The fields have no default constructor, so exactly one count of initialisers builds T.
template <class T, size_t N = 1>
constexpr size_t field_count() {
  if constexpr (N > 32) {
    return 0;
  } else if constexpr (brace_constructible<T>(std::make_index_sequence<N>{})) {
    return N;
  } else {
    return field_count<T, N + 1>();
  }
}


// Pointers to every field of an Args struct, in declaration order.
template <class A>
auto field_pointers(const A& a) {
  constexpr size_t n = field_count<A>();
  static_assert(n > 0, "an Args struct holds 1..32 KPLAN_* fields and nothing else");
  // clang-format off
  if constexpr (n == 1) { const auto& [a0] = a; return std::tuple{&a0}; }
  else if constexpr (n == 2) { const auto& [a0, a1] = a; return std::tuple{&a0, &a1}; }
  else if constexpr (n == 3) { const auto& [a0, a1, a2] = a; return std::tuple{&a0, &a1, &a2}; }
  else if constexpr (n == 4) { const auto& [a0, a1, a2, a3] = a; return std::tuple{&a0, &a1, &a2, &a3}; }
  else if constexpr (n == 5) { const auto& [a0, a1, a2, a3, a4] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4}; }
  else if constexpr (n == 6) { const auto& [a0, a1, a2, a3, a4, a5] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5}; }
  else if constexpr (n == 7) { const auto& [a0, a1, a2, a3, a4, a5, a6] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6}; }
  else if constexpr (n == 8) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7}; }
  else if constexpr (n == 9) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8}; }
  else if constexpr (n == 10) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9}; }
  else if constexpr (n == 11) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10}; }
  else if constexpr (n == 12) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11}; }
  else if constexpr (n == 13) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12}; }
  else if constexpr (n == 14) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13}; }
  else if constexpr (n == 15) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14}; }
  else if constexpr (n == 16) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15}; }
  else if constexpr (n == 17) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16}; }
  else if constexpr (n == 18) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17}; }
  else if constexpr (n == 19) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18}; }
  else if constexpr (n == 20) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19}; }
  else if constexpr (n == 21) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20}; }
  else if constexpr (n == 22) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21}; }
  else if constexpr (n == 23) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22}; }
  else if constexpr (n == 24) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23}; }
  else if constexpr (n == 25) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24}; }
  else if constexpr (n == 26) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25}; }
  else if constexpr (n == 27) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25, &a26}; }
  else if constexpr (n == 28) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25, &a26, &a27}; }
  else if constexpr (n == 29) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25, &a26, &a27, &a28}; }
  else if constexpr (n == 30) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25, &a26, &a27, &a28, &a29}; }
  else if constexpr (n == 31) { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25, &a26, &a27, &a28, &a29, &a30}; }
  else { const auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31] = a; return std::tuple{&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11, &a12, &a13, &a14, &a15, &a16, &a17, &a18, &a19, &a20, &a21, &a22, &a23, &a24, &a25, &a26, &a27, &a28, &a29, &a30, &a31}; }
  // clang-format on
}

template <class A>
using FieldPointers = decltype(field_pointers(std::declval<const A&>()));

}  // namespace args_detail

// The kernel entry's parameters (names and C kinds), from the field types alone.
template <class A>
std::vector<KernelArg> signature_of() {
  using Ptrs = args_detail::FieldPointers<A>;
  std::vector<KernelArg> out;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((out.push_back({std::string(std::remove_cvref_t<std::remove_pointer_t<std::tuple_element_t<I, Ptrs>>>::name),
                     std::remove_cvref_t<std::remove_pointer_t<std::tuple_element_t<I, Ptrs>>>::kind})),
     ...);
  }(std::make_index_sequence<std::tuple_size_v<Ptrs>>{});
  return out;
}

// A launch's arguments, in the entry's parameter order, and the tensor maps its TensorMap
// arguments name (LaunchArg index = position in tensor_maps, as plan::Launch stores them).
struct LaunchArgs {
  std::vector<plan::LaunchArg> args;
  std::vector<plan::TensorMapDesc> tensor_maps;
};

namespace args_detail {
inline void append(LaunchArgs& out, const plan::LaunchArg& a) { out.args.push_back(a); }
inline void append(LaunchArgs& out, const plan::TensorMapDesc& t) {
  out.args.push_back({plan::ArgKind::TensorMap, static_cast<uint32_t>(out.tensor_maps.size()), 0, 0, 0});
  out.tensor_maps.push_back(t);
}
}  // namespace args_detail

template <class A>
LaunchArgs launch_arguments(const A& a) {
  LaunchArgs out;
  std::apply([&](const auto*... field) { (args_detail::append(out, field->value), ...); }, args_detail::field_pointers(a));
  return out;
}

// The arguments alone (families without tensor maps).
template <class A>
std::vector<plan::LaunchArg> launch_args(const A& a) {
  return launch_arguments(a).args;
}

}  // namespace kplan::codegen
