#include "tests/unit/ops/op_case.h"

#include <cstring>

#include "compiler/frontend/int4_pack.h"
#include "ir/support/tree_mask.h"
#include "ir/support/xoshiro256.h"

namespace kplan::ops_test {
namespace {

using ir::Dim;
using ir::Type;

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<Dim> dims(const std::vector<int64_t>& shape) { return {shape.begin(), shape.end()}; }

}  // namespace

StepData make_step(const OpCase& c, uint64_t seed) {
  StepData s;
  s.tokens = c.tokens;
  s.past = c.past;
  s.cache_width = c.cache_width;
  s.mask = c.mask;
  s.keep = c.keep;
  Xoshiro256 rng(seed);
  for (int64_t t = 0; t < c.tokens; ++t) s.ids.push_back(static_cast<int32_t>(rng.next_u64() % CaseBuilder::kVocab));
  if (c.mask == Mask::Tree) {  // a random tree: parent before child; position = root + depth
    std::vector<int64_t> depth;
    for (int64_t i = 0; i < c.tokens; ++i) {
      s.parents.push_back(i == 0 ? -1 : static_cast<int32_t>(rng.next_u64() % i));
      depth.push_back(i == 0 ? 0 : depth[s.parents[i]] + 1);
      s.positions.push_back(static_cast<int32_t>(c.past + depth[i]));
    }
    s.tree_mask = ancestor_mask(s.parents);
  } else {
    for (int64_t t = 0; t < c.tokens; ++t) s.positions.push_back(static_cast<int32_t>(c.past + t));
    s.tree_mask = causal_mask(c.tokens);
  }
  s.cache = Matrix(c.past, c.cache_width);
  for (float& x : s.cache.data) x = static_cast<float>(rng.uniform() * 2 - 1);
  return s;
}

CaseBuilder::CaseBuilder(const StepData& step, uint64_t seed)
    : module(std::make_unique<ir::Module>()), step_(step), fn_(module->add_function("target")), b_(*fn_), seed_(seed) {
  const Dim T = Dim::sym("T");
  fn_->add_arg("tokens", Type{DType::I32, {T}});
  fn_->add_arg("positions", Type{DType::I32, {T}});
  if (step.mask == Mask::Tree) fn_->add_arg("tree_mask", Type{DType::U32, {T, Dim::sym("W")}});
  if (step.cache_width > 0) fn_->add_arg("kv.0", Type{DType::F32, {Dim::sym("S"), step.cache_width}});
  if (!step.keep.empty()) fn_->add_arg("keep", Type{DType::I32, {Dim::sym("A")}});
}

std::vector<float> CaseBuilder::random(int64_t n, float scale, bool bf16) {
  Xoshiro256 rng(seed_ * 7919 + weights.size());
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    x = static_cast<float>(rng.uniform() * 2 - 1) * scale;
    if (bf16) x = bf16_to_float(float_to_bf16(x));
  }
  return v;
}

ir::Value* CaseBuilder::weight_bf16(std::vector<int64_t> shape, float scale, std::vector<float>* host) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const std::vector<float> v = random(n, scale, true);
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(v[i]);
  const std::string name = fresh("bf16");
  weights.push_back({name, DType::BF16, shape, bytes_of(bits)});
  if (host) *host = v;
  return b_.weight(name, Type{DType::BF16, dims(shape)});
}

ir::Value* CaseBuilder::weight_f32(std::vector<int64_t> shape, float scale, std::vector<float>* host) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const std::vector<float> v = random(n, scale, false);
  const std::string name = fresh("f32");
  weights.push_back({name, DType::F32, shape, bytes_of(v)});
  if (host) *host = v;
  return b_.weight(name, Type{DType::F32, dims(shape)});
}

std::pair<ir::Value*, ir::Value*> CaseBuilder::weight_int4(int64_t n, int64_t k, float scale, std::vector<float>* host) {
  const PackedInt4 p = pack_int4(random(n * k, scale, false), n, k, 32);
  const std::string name = fresh("int4");
  weights.push_back({name + ".packed", DType::I32, {n, k / 8}, bytes_of(p.packed)});
  weights.push_back({name + ".scale", DType::BF16, {n, k / 32}, bytes_of(p.scale)});
  if (host) *host = unpack_int4(p);
  return {b_.weight(name + ".packed", Type{DType::I32, {n, k / 8}}), b_.weight(name + ".scale", Type{DType::BF16, {n, k / 32}})};
}

ir::Value* CaseBuilder::stack_bf16(int64_t count, int64_t rows, int64_t cols, float scale, std::vector<float>* host) {
  const std::string name = fresh("stack");
  std::vector<float> all;
  for (int64_t e = 0; e < count; ++e) {
    const std::vector<float> v = random(rows * cols, scale, true);
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(v[i]);
    weights.push_back({name + "." + std::to_string(e) + ".w", DType::BF16, {rows, cols}, bytes_of(bits)});
    all.insert(all.end(), v.begin(), v.end());
  }
  if (host) *host = all;
  return b_.weight_stack(name + ".*.w", count, Type{DType::BF16, {count, rows, cols}});
}

std::pair<ir::Value*, ir::Value*> CaseBuilder::stack_int4(int64_t count, int64_t rows, int64_t cols, float scale,
                                                          std::vector<float>* host) {
  const std::string name = fresh("stack4");
  std::vector<float> all;
  for (int64_t e = 0; e < count; ++e) {
    const PackedInt4 p = pack_int4(random(rows * cols, scale, false), rows, cols, 32);
    weights.push_back({name + "." + std::to_string(e) + ".packed", DType::I32, {rows, cols / 8}, bytes_of(p.packed)});
    weights.push_back({name + "." + std::to_string(e) + ".scale", DType::BF16, {rows, cols / 32}, bytes_of(p.scale)});
    const std::vector<float> v = unpack_int4(p);
    all.insert(all.end(), v.begin(), v.end());
  }
  if (host) *host = all;
  return {b_.weight_stack(name + ".*.packed", count, Type{DType::I32, {count, rows, cols / 8}}),
          b_.weight_stack(name + ".*.scale", count, Type{DType::BF16, {count, rows, cols / 32}})};
}

ir::Value* CaseBuilder::input(int64_t width, float scale, Matrix* host) {
  std::vector<float> table;
  ir::Value* t = weight_bf16({kVocab, width}, scale, &table);
  if (host) {
    *host = Matrix(step_.tokens, width);
    for (int64_t r = 0; r < step_.tokens; ++r) std::copy_n(table.begin() + step_.ids[r] * width, width, host->row(r));
  }
  return b_.embedding(fn_->arg("tokens"), t);
}

void CaseBuilder::output(ir::Value* v) {
  const std::vector<Dim>& s = v->type().shape;
  if (s.size() == 3) v = b_.reshape(v, {s[0], Dim(s[1].value() * s[2].value())});
  b_.output(v, "logits");
}

}  // namespace kplan::ops_test
