#include "runtime/cpu/weight_table.h"

#include <cstring>

#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "ir/support/int4_frag.h"
#include "runtime/cpu/synthetic_weights.h"

namespace kplan::cpu {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

bool cpu_readable_layout(const std::string& layout) {
  return layout == "row_major" || layout == "stacked" || layout == "ct_pack_quantized_int4" || layout == int4_frag::kWordsLayout ||
         layout == int4_frag::kScalesLayout;
}

WeightTable::WeightTable(const std::vector<plan::Weight>& weights, std::string plan_source)
    : plan_source_(std::move(plan_source)) {
  for (const plan::Weight& w : weights) by_key_.emplace(std::make_pair(w.source, w.name), &w);
}

const plan::Weight* WeightTable::find(const std::string& source, const std::string& name) const {
  auto it = by_key_.find({source, name});
  return it == by_key_.end() ? nullptr : it->second;
}

TensorPtr WeightTable::read(const plan::Weight& w, const ir::Type& want, const std::string& by) const {
  const std::string what = plan_source_ + ": weight " + w.name + " (" + w.source + ")";
  if (!cpu_readable_layout(w.layout))
    throw Error(what + " has layout '" + w.layout + "', which the CPU reference cannot read (it reads " +
                "row_major, stacked, ct_pack_quantized_int4, int4_frag and int4_frag_scales)");
  std::vector<int64_t> shape;
  for (const ir::Dim& d : want.shape) shape.push_back(d.constant);
  if (w.dtype != want.dtype || w.shape != shape)
    throw Error(what + " is " + std::string(dtype_name(w.dtype)) + shape_str(w.shape) + ", but the IR's " + by + " op says " + want.str());
  auto t = std::make_shared<Tensor>();
  t->shape = shape;
  const size_t n = static_cast<size_t>(t->numel());
  if (w.synthetic) {  // generated here, as the device generates it at load
    if (w.synthetic->kind == plan::SyntheticKind::Int4Packed) {
      t->is_int = true;
      t->i = synthetic_words(w);
    } else {
      t->f = synthetic_floats(w);
    }
    return t;
  }
  const std::span<const uint8_t> bytes = w.data();
  if (bytes.size() != n * dtype_size(w.dtype))
    throw Error(what + " holds " + std::to_string(bytes.size()) + " bytes, its type needs " +
                std::to_string(n * dtype_size(w.dtype)));
  if (is_float_dtype(w.dtype)) {
    if (const int64_t bad = first_non_finite(bytes.data(), w.dtype, n); bad >= 0)
      throw Error(what + " holds a NaN or infinity (element " + std::to_string(bad) + "): the checkpoint is damaged");
    t->f.resize(n);
    for (size_t i = 0; i < n; ++i) t->f[i] = element_to_float(bytes.data(), w.dtype, i);
    return t;
  }
  t->is_int = true;
  t->i.resize(n);
  switch (w.dtype) {
    case DType::I32:
    case DType::U32: std::memcpy(t->i.data(), bytes.data(), n * 4); break;
    case DType::I8:
      for (size_t i = 0; i < n; ++i) t->i[i] = static_cast<int8_t>(bytes[i]);
      break;
    case DType::U8:
    case DType::BOOL:
      for (size_t i = 0; i < n; ++i) t->i[i] = bytes[i];
      break;
    default:
      throw Error(what + ": dtype " + std::string(dtype_name(w.dtype)) + " is not read by the CPU reference");
  }
  return t;
}

TensorPtr WeightTable::load(const ir::Op& op) const {
  const auto key = std::make_tuple(static_cast<int>(op.kind()), op.attrs().get_string("ckpt"), op.attrs().get_string("name"));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = loaded_.find(key);
  if (it != loaded_.end()) {
    // The same weight named again: its IR type must agree with the first reader's.
    std::vector<int64_t> shape;
    for (const ir::Dim& d : op.result()->type().shape) shape.push_back(d.constant);
    if (shape != it->second->shape)
      throw Error(plan_source_ + ": weight " + std::get<2>(key) + " is named with shape " + shape_str(shape) + " and " +
                  shape_str(it->second->shape));
    return it->second;
  }
  TensorPtr t = load_uncached(op);
  bytes_read_ += static_cast<uint64_t>(t->is_int ? t->i.size() * sizeof(int32_t) : t->f.size() * sizeof(float));
  loaded_.emplace(key, t);
  return t;
}

int64_t WeightTable::tensors_read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(loaded_.size());
}

uint64_t WeightTable::bytes_read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_read_;
}

TensorPtr WeightTable::load_uncached(const ir::Op& op) const {
  const std::string source = op.attrs().get_string("ckpt"), name = op.attrs().get_string("name");
  const ir::Type& type = op.result()->type();
  const std::string by(op.name());
  if (op.kind() == ir::OpKind::Weight) {
    const plan::Weight* w = find(source, name);
    if (!w)
      throw Error(plan_source_ + ": the plan has no weight " + name + " (source '" + source +
                  "'), which its IR names");
    return read(*w, type, by);
  }
  if (const plan::Weight* stacked = find(source, name)) return read(*stacked, type, by);
  // Not stacked in the plan: stack the experts' own weights (the '*' is the expert index).
  const int64_t count = op.attrs().get_int("count");
  const size_t star = name.find('*');
  ir::Type one{type.dtype, {type.shape.begin() + 1, type.shape.end()}};
  auto t = std::make_shared<Tensor>();
  for (int64_t e = 0; e < count; ++e) {
    const std::string expert = name.substr(0, star) + std::to_string(e) + name.substr(star + 1);
    const plan::Weight* w = find(source, expert);
    if (!w)
      throw Error(plan_source_ + ": the plan has neither the stacked weight " + name + " nor expert weight " +
                  expert + " (source '" + source + "'), which its IR names");
    TensorPtr part = read(*w, one, by);
    t->is_int = part->is_int;
    t->f.insert(t->f.end(), part->f.begin(), part->f.end());
    t->i.insert(t->i.end(), part->i.begin(), part->i.end());
  }
  for (const ir::Dim& d : type.shape) t->shape.push_back(d.constant);
  return t;
}

}  // namespace kplan::cpu
