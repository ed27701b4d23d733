#include "compiler/driver/weight_table.h"

#include "ir/support/error.h"

namespace kplan {

WeightTable::WeightTable(const std::vector<TensorSpec>& specs, std::string ckpt,
                         int64_t group_size)
    : ckpt_(std::move(ckpt)), group_size_(group_size) {
  by_name_.reserve(specs.size());
  for (const auto& s : specs) by_name_.emplace(s.name, &s);
}

const TensorSpec& WeightTable::spec(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    throw Error("IR builder: tensor '" + name + "' is not in the " + ckpt_ +
                " checkpoint's tensor list");
  return *it->second;
}

ir::Type WeightTable::type(const std::string& name) const {
  const TensorSpec& s = spec(name);
  ir::Type t{s.dtype, {}};
  for (int64_t d : s.shape) t.shape.emplace_back(d);
  return t;
}

ir::Value* WeightTable::weight(ir::Builder& b, const std::string& name) const {
  return b.weight(name, type(name), ckpt_);
}

ir::Value* WeightTable::linear(ir::Builder& b, ir::Value* x, const std::string& module) const {
  if (is_int4(module)) {
    // Separate statements: argument evaluation order would make the op order compiler-specific.
    ir::Value* packed = weight(b, module + ".weight_packed");
    ir::Value* scale = weight(b, module + ".weight_scale");
    return b.matmul_int4(x, packed, scale, group_size_);
  }
  return b.matmul(x, weight(b, module + ".weight"));
}

ir::Value* WeightTable::stack(ir::Builder& b, const std::string& pattern, int64_t count) const {
  size_t star = pattern.find('*');
  ir::Type one = type(pattern.substr(0, star) + "0" + pattern.substr(star + 1));
  ir::Type t{one.dtype, {ir::Dim(count)}};
  t.shape.insert(t.shape.end(), one.shape.begin(), one.shape.end());
  return b.weight_stack(pattern, count, t, ckpt_);
}

}  // namespace kplan
