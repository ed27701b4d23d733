#include "compiler/plan/ir_weights.h"

#include <set>
#include <utility>

#include "ir/support/dtype.h"
#include "ir/support/error.h"

namespace kplan::plan {

void add_ir_weights(const ir::Module& module, const CheckpointBytes& bytes, std::vector<Weight>& weights) {
  std::set<std::pair<std::string, std::string>> have;
  for (const Weight& w : weights) have.emplace(w.source, w.name);
  for (const ir::Function* fn : module.functions())
    for (const ir::Op* op : fn->ops()) {
      if (op->kind() != ir::OpKind::Weight && op->kind() != ir::OpKind::WeightStack) continue;
      Weight w;
      w.name = op->attrs().get_string("name");
      w.source = op->attrs().get_string("ckpt");
      if (!have.emplace(w.source, w.name).second) continue;
      const ir::Type& t = op->result()->type();
      w.dtype = t.dtype;
      uint64_t size = dtype_size(w.dtype);
      for (const ir::Dim& d : t.shape) {
        w.shape.push_back(d.constant);
        size *= static_cast<uint64_t>(d.constant);
      }
      if (op->kind() == ir::OpKind::Weight) {
        w.view = bytes(w.source, w.name);
      } else {
        w.layout = "stacked";
        const size_t star = w.name.find('*');
        for (int64_t e = 0; e < op->attrs().get_int("count"); ++e) {
          const auto part = bytes(w.source, w.name.substr(0, star) + std::to_string(e) + w.name.substr(star + 1));
          w.owned.insert(w.owned.end(), part.begin(), part.end());
        }
      }
      if (w.data().size() != size)
        throw Error("plan: weight " + w.name + " (" + w.source + ") holds " + std::to_string(w.data().size()) +
                    " bytes, its IR type " + t.str() + " needs " + std::to_string(size));
      w.size = size;
      weights.push_back(std::move(w));
    }
}

}  // namespace kplan::plan
