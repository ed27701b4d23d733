#pragma once
// One launch as the emulator sees it: its arguments by their parameter names (the kernel's
// signature names, which plan::Kernel::param_names records; never by position), its kernel's
// compile-time constants, and gather/scatter of strided operands between the emulated memory
// and the dense fp32 matrices the runtime/cpu ops take.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen/launch_geometry.h"
#include "emulator_memory.h"
#include "ir/support/int4.h"
#include "runtime/step_model.h"

namespace kplan::codegen::testing_util {

// Element (r, h, c) of a strided operand sits at base + r*row_stride + h*head_stride +
// c*col_stride; it becomes element (r*heads + h, c) of the dense matrix.
struct Strided {
  int64_t rows = 0, cols = 0, row_stride = 0;
  int64_t heads = 1, head_stride = 0;
  int64_t col_stride = 1, base = 0;
  int64_t at(int64_t r, int64_t h, int64_t c) const { return base + r * row_stride + h * head_stride + c * col_stride; }
};

// The dtype a template's dtype constant (ElemType code) names.
inline DType elem_dtype(int64_t code) { return code == static_cast<int64_t>(ElemType::BF16) ? DType::BF16 : DType::F32; }

class LaunchArgs {
 public:
  LaunchArgs(EmulatorMemory& mem, const plan::LoweredPlan& lp, const plan::Launch& l)
      : mem_(mem), lp_(lp), launch_(l), kernel_(lp.kernels.at(l.kernel)) {
    if (l.args.size() != kernel_.signature.size())
      throw Error("emulator: " + kernel_.id + " launch has " + std::to_string(l.args.size()) + " arguments, its signature " +
                  std::to_string(kernel_.signature.size()));
    mem_.begin_launch(l.note.empty() ? kernel_.id : l.note);
  }

  LaunchArgs(const LaunchArgs&) = delete;
  LaunchArgs& operator=(const LaunchArgs&) = delete;

  const KernelSource& kernel() const { return kernel_; }
  const plan::Launch& launch() const { return launch_; }
  EmulatorMemory& memory() { return mem_; }
  int64_t param(const std::string& name) const { return kernel_param(kernel_, name); }
  DType dtype_param(const std::string& name) const { return elem_dtype(param(name)); }

  // A pointer argument, resolved; the same name gives the same Operand (its value check spans
  // every access through it).
  Operand& ptr(std::string_view name) {
    for (Operand& o : operands_)
      if (o.arg == name) return o;
    const plan::LaunchArg& a = arg(name, ArgKind::DevicePtr);
    Operand o;
    o.arg = std::string(name);
    switch (a.kind) {
      case plan::ArgKind::Buffer: o.index = a.index; o.offset = a.offset; break;
      case plan::ArgKind::Weight: o.is_weight = true; o.index = a.index; o.offset = a.offset; break;
      case plan::ArgKind::StepInput: o.index = step_input_slot(static_cast<plan::StepInputKind>(a.index)); break;
      default: throw Error("emulator: " + kernel_.id + " argument " + o.arg + " is not a pointer");
    }
    operands_.push_back(o);
    return operands_.back();
  }
  int64_t i32(std::string_view name) const { return arg(name, ArgKind::I32).ival; }
  // Whether two pointer arguments name the same bytes (a gate/up launch's logits given as its ids:
  // routed already).
  bool same_pointer(std::string_view a, std::string_view b) const { return arg(a, ArgKind::DevicePtr) == arg(b, ArgKind::DevicePtr); }
  float f32(std::string_view name) const { return arg(name, ArgKind::F32).fval; }

  Matrix gather(std::string_view name, const Strided& s, DType t) {
    Operand& o = ptr(name);
    Matrix m(s.rows * s.heads, s.cols);
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t c = 0; c < s.cols; ++c) m.row(r * s.heads + h)[c] = mem_.load(o, s.at(r, h, c), t);
    return m;
  }
  // Rows of width `cols` at `row_stride` apart (the common case).
  Matrix gather_rows(std::string_view name, int64_t rows, int64_t cols, int64_t row_stride, DType t, int64_t base = 0) {
    return gather(name, Strided{rows, cols, row_stride, 1, 0, 1, base}, t);
  }
  std::vector<int32_t> gather_i32(std::string_view name, int64_t n) {
    Operand& o = ptr(name);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = mem_.load_i32(o, i);
    return v;
  }
  std::vector<uint32_t> gather_u32(std::string_view name, int64_t n) {
    Operand& o = ptr(name);
    std::vector<uint32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = mem_.load_u32(o, i);
    return v;
  }
  // A compressed-tensors INT4 matrix [rows, cols] (packed words [rows, cols/8], bf16 scales
  // [rows, cols/32], as weight_dot.cuh reads them) from `row0` on, dequantised.
  Matrix gather_int4(std::string_view packed, std::string_view scale, int64_t row0, int64_t rows, int64_t cols) {
    Operand& p = ptr(packed);
    Operand& s = ptr(scale);
    Matrix m(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; c += int4::kValuesPerWord) {
        const uint32_t word = mem_.load_u32(p, (row0 + r) * (cols / int4::kValuesPerWord) + c / int4::kValuesPerWord);
        const float scl = mem_.load(s, (row0 + r) * (cols / 32) + c / 32, DType::BF16);
        for (int64_t k = c; k < std::min(cols, c + int4::kValuesPerWord); ++k)
          m.row(r)[k] = static_cast<float>(int4::nibble(word, k) - int4::kZeroPoint) * scl;
      }
    return m;
  }

  // Writes m (rows * heads, cols) back; `accumulate` adds to what is there.
  void scatter(std::string_view name, const Strided& s, DType t, const Matrix& m, bool accumulate = false) {
    Operand& o = ptr(name);
    if (m.rows != s.rows * s.heads || m.cols != s.cols) throw Error("emulator: " + kernel_.id + " result does not fit " + std::string(name));
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t c = 0; c < s.cols; ++c) {
          const int64_t i = s.at(r, h, c);
          const float v = m.row(r * s.heads + h)[c];
          mem_.store(o, i, t, accumulate ? mem_.load(o, i, t) + v : v);
        }
  }
  void scatter_rows(std::string_view name, int64_t row_stride, DType t, const Matrix& m, bool accumulate = false, int64_t base = 0) {
    scatter(name, Strided{m.rows, m.cols, row_stride, 1, 0, 1, base}, t, m, accumulate);
  }
  void scatter_i32(std::string_view name, const std::vector<int32_t>& v) {
    Operand& o = ptr(name);
    for (size_t i = 0; i < v.size(); ++i) mem_.store_i32(o, static_cast<int64_t>(i), v[i]);
  }

 private:
  const plan::LaunchArg& arg(std::string_view name, ArgKind kind) const {
    for (size_t i = 0; i < kernel_.signature.size(); ++i) {
      if (kernel_.signature[i].name != name) continue;
      if (kernel_.signature[i].kind != kind)
        throw Error("emulator: " + kernel_.id + " argument " + std::string(name) + " is a " + arg_kind_name(kernel_.signature[i].kind));
      return launch_.args[i];
    }
    throw Error("emulator: " + kernel_.id + " has no argument named " + std::string(name));
  }
  uint32_t step_input_slot(plan::StepInputKind k) const {
    for (const plan::StepInputBinding& b : lp_.step_inputs)
      if (b.kind == k) return b.slot;
    throw Error("emulator: step input not bound");
  }

  EmulatorMemory& mem_;
  const plan::LoweredPlan& lp_;
  const plan::Launch& launch_;
  const KernelSource& kernel_;
  std::deque<Operand> operands_;  // a deque: references stay valid as arguments are resolved
};

}  // namespace kplan::codegen::testing_util
