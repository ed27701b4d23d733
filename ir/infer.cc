#include "ir/infer.h"

#include <algorithm>

#include "ir/support/error.h"

namespace kplan::ir {

namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

bool is_float(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F8E4M3;
}

// Operand access with role names, so messages read "operand 1 (w) ...".
class Operands {
 public:
  Operands(const std::vector<Type>& types, std::vector<std::string> roles)
      : types_(types), roles_(std::move(roles)) {}

  const Type& at(size_t i) const { return types_[i]; }
  std::string desc(size_t i) const {
    std::string role = i < roles_.size() ? roles_[i] : roles_.back();
    return "operand " + std::to_string(i) + " (" + role + ")";
  }
  const Type& rank(size_t i, size_t r) const {
    if (types_[i].rank() != r)
      fail(desc(i) + " has type " + types_[i].str() + ", expected rank " + std::to_string(r));
    return types_[i];
  }
  void dtype(size_t i, DType t) const {
    if (types_[i].dtype != t)
      fail(desc(i) + " has type " + types_[i].str() + ", expected dtype " +
           std::string(dtype_name(t)));
  }
  void floating(size_t i) const {
    if (!is_float(types_[i].dtype))
      fail(desc(i) + " has type " + types_[i].str() + ", expected a float dtype");
  }
  // Dim `d` of operand i equals `want` (described by `what`).
  void dim(size_t i, size_t d, const Dim& want, const std::string& what) const {
    const Dim& got = types_[i].shape.at(d);
    if (!(got == want))
      fail(desc(i) + " has shape " + types_[i].shape_str() + ", expected dim " +
           std::to_string(d) + " = " + want.str() + " (" + what + ")");
  }
  int64_t constant_dim(size_t i, size_t d) const {
    const Dim& got = types_[i].shape.at(d);
    if (!got.is_constant())
      fail(desc(i) + " has shape " + types_[i].shape_str() + ", expected a constant dim " +
           std::to_string(d));
    return got.value();
  }

 private:
  const std::vector<Type>& types_;
  std::vector<std::string> roles_;
};

void count(const std::vector<Type>& ops, size_t lo, size_t hi) {
  if (ops.size() < lo || ops.size() > hi) {
    std::string want = lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
    if (hi == SIZE_MAX) want = "at least " + std::to_string(lo);
    fail("has " + std::to_string(ops.size()) + " operands, expected " + want);
  }
}

Type f32(std::vector<Dim> shape) { return Type{DType::F32, std::move(shape)}; }

// a - b when b's symbols are a sub-multiset of a's (for N = S + T); nullopt otherwise.
std::optional<Dim> subtract(const Dim& a, const Dim& b) {
  Dim d;
  d.constant = a.constant - b.constant;
  std::vector<std::string> rest = a.symbols;
  for (const auto& s : b.symbols) {
    auto it = std::find(rest.begin(), rest.end(), s);
    if (it == rest.end()) return std::nullopt;
    rest.erase(it);
  }
  d.symbols = rest;
  return d;
}

void positive_int(const Attrs& a, const char* key) {
  if (a.get_int(key) <= 0) fail("attribute '" + std::string(key) + "' must be positive");
}

const Type& declared_one(const std::vector<Type>& declared, const char* why) {
  if (declared.size() != 1) fail(std::string("needs its result type (") + why + ")");
  return declared[0];
}

// The tree mask operand: u32[T, W].
void check_mask(const Operands& o, size_t i, const Dim& t) {
  o.rank(i, 2);
  o.dtype(i, DType::U32);
  o.dim(i, 0, t, "tokens of the step");
}

// Key rows N must be S + T: the step's tokens are the last T rows.
void check_keys_cover_step(const Operands& o, size_t i, const Dim& n, const Dim& t) {
  if (!subtract(n, t))
    fail(o.desc(i) + " has " + n.str() + " rows, expected cache rows + " + t.str() +
         " (the step's entries last)");
}

void check_rope_attrs(const Attrs& a) {
  a.get_float("theta");
  a.get_bool("interleaved");
  const std::string& scaling = a.get_string("scaling");
  if (scaling == "yarn") {
    a.get_float("factor");
    positive_int(a, "original_max_position_embeddings");
    a.get_float("beta_fast");
    a.get_float("beta_slow");
  } else if (scaling != "none") {
    fail("attribute 'scaling' must be \"none\" or \"yarn\", got \"" + scaling + "\"");
  }
  a.get_float("attention_factor");
}

void check_int4(const Operands& o, size_t packed, size_t scale, const Dim& out, int64_t k,
                int64_t group, size_t lead) {
  // packed i32[lead..., out, k/8], scale [lead..., out, k/group]
  o.dtype(packed, DType::I32);
  o.floating(scale);
  if (k % 8 != 0 || k % group != 0)
    fail("input dim " + std::to_string(k) + " is not a multiple of 8 and of group_size " +
         std::to_string(group));
  o.dim(packed, lead, out, "output features");
  o.dim(packed, lead + 1, Dim(k / 8), "input features / 8");
  o.dim(scale, lead, out, "output features");
  o.dim(scale, lead + 1, Dim(k / group), "input features / group_size");
}

}  // namespace

std::vector<Type> infer_result_types(OpKind kind, const std::vector<Type>& t, const Attrs& a,
                                     const std::vector<Type>& declared) {
  switch (kind) {
    case OpKind::Weight: {
      count(t, 0, 0);
      if (a.get_string("name").empty()) fail("attribute 'name' is empty");
      const std::string& ckpt = a.get_string("ckpt");
      if (ckpt != "target" && ckpt != "draft")
        fail("attribute 'ckpt' must be \"target\" or \"draft\", got \"" + ckpt + "\"");
      const Type& r = declared_one(declared, "a checkpoint tensor's dtype and shape");
      for (const auto& d : r.shape)
        if (!d.is_constant()) fail("weight shape " + r.shape_str() + " must be constant");
      return {r};
    }
    case OpKind::WeightStack: {
      count(t, 0, 0);
      const std::string& name = a.get_string("name");
      if (std::count(name.begin(), name.end(), '*') != 1)
        fail("attribute 'name' must contain exactly one '*', got \"" + name + "\"");
      positive_int(a, "count");
      const std::string& ckpt = a.get_string("ckpt");
      if (ckpt != "target" && ckpt != "draft")
        fail("attribute 'ckpt' must be \"target\" or \"draft\", got \"" + ckpt + "\"");
      const Type& r = declared_one(declared, "the stacked tensors' dtype and shape");
      if (r.rank() < 2 || !(r.shape[0] == Dim(a.get_int("count"))))
        fail("result shape " + r.shape_str() + " must start with count = " +
             std::to_string(a.get_int("count")));
      for (const auto& d : r.shape)
        if (!d.is_constant()) fail("weight shape " + r.shape_str() + " must be constant");
      return {r};
    }
    case OpKind::Output: {
      count(t, 1, 1);
      if (a.get_string("name").empty()) fail("attribute 'name' is empty");
      return {};
    }
    case OpKind::Slice: {
      count(t, 1, 1);
      Operands o(t, {"x"});
      int64_t axis = a.get_int("axis"), start = a.get_int("start"), size = a.get_int("size");
      if (axis < 0 || axis >= static_cast<int64_t>(t[0].rank()))
        fail("axis " + std::to_string(axis) + " out of range for " + t[0].str());
      int64_t dim = o.constant_dim(0, axis);
      // Compared without start + size, which can overflow (untrusted IR text).
      if (start < 0 || size <= 0 || start > dim || size > dim - start) {
        int64_t end_value = 0;
        const std::string end = __builtin_add_overflow(start, size, &end_value)
                                    ? std::to_string(start) + " + " + std::to_string(size)
                                    : std::to_string(end_value);
        fail("slice [" + std::to_string(start) + ", " + end + ") out of range for dim " + std::to_string(axis) +
             " of " + t[0].str());
      }
      Type r = t[0];
      r.shape[axis] = Dim(size);
      return {r};
    }
    case OpKind::Reshape: {
      count(t, 1, 1);
      const Type& r = declared_one(declared, "the new shape");
      if (r.dtype != t[0].dtype)
        fail("result dtype " + std::string(dtype_name(r.dtype)) + " differs from operand " +
             t[0].str());
      if (!same_element_count(t[0].shape, r.shape))
        fail("cannot reshape " + t[0].str() + " to " + r.shape_str() +
             " (element counts differ)");
      return {r};
    }
    case OpKind::Transpose: {
      count(t, 1, 1);
      const auto& perm = a.get_ints("perm");
      std::vector<int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      bool ok = sorted.size() == t[0].rank();
      for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
      if (!ok) fail("attribute 'perm' is not a permutation of the " +
                    std::to_string(t[0].rank()) + " dims of " + t[0].str());
      Type r{t[0].dtype, {}};
      for (int64_t p : perm) r.shape.push_back(t[0].shape[p]);
      return {r};
    }
    case OpKind::Concat: {
      count(t, 1, SIZE_MAX);
      Operands o(t, {"x"});
      int64_t axis = a.get_int("axis");
      if (axis < 0 || axis >= static_cast<int64_t>(t[0].rank()))
        fail("axis " + std::to_string(axis) + " out of range for " + t[0].str());
      Type r = t[0];
      for (size_t i = 1; i < t.size(); ++i) {
        o.rank(i, t[0].rank());
        o.dtype(i, t[0].dtype);
        for (size_t d = 0; d < t[0].rank(); ++d)
          if (static_cast<int64_t>(d) != axis) o.dim(i, d, t[0].shape[d], "as operand 0");
        r.shape[axis] = r.shape[axis] + t[i].shape[axis];
      }
      return {r};
    }
    case OpKind::Add:
    case OpKind::Swiglu: {
      count(t, 2, 2);
      Operands o(t, kind == OpKind::Add ? std::vector<std::string>{"a", "b"}
                                        : std::vector<std::string>{"gate", "up"});
      o.floating(0);
      o.floating(1);
      if (t[0].shape != t[1].shape)
        fail("operand shapes differ: " + t[0].shape_str() + " and " + t[1].shape_str());
      return {f32(t[0].shape)};
    }
    case OpKind::RmsNorm: {
      count(t, 2, 2);
      Operands o(t, {"x", "w"});
      o.floating(0);
      o.floating(1);
      if (t[0].rank() < 1) fail("operand 0 (x) must have rank >= 1");
      o.rank(1, 1);
      o.dim(1, 0, t[0].shape.back(), "last dim of x");
      if (a.get_float("eps") <= 0) fail("attribute 'eps' must be positive");
      return {f32(t[0].shape)};
    }
    case OpKind::Matmul:
    case OpKind::LmHead: {
      count(t, 2, 2);
      Operands o(t, {"x", "w"});
      o.floating(0);
      o.floating(1);
      if (kind == OpKind::LmHead) o.rank(0, 2);
      if (t[0].rank() < 1) fail("operand 0 (x) must have rank >= 1");
      o.rank(1, 2);
      o.dim(1, 1, t[0].shape.back(), "input features = last dim of x");
      auto shape = t[0].shape;
      shape.back() = t[1].shape[0];
      return {f32(shape)};
    }
    case OpKind::MatmulInt4: {
      count(t, 3, 3);
      Operands o(t, {"x", "packed", "scale"});
      o.floating(0);
      if (t[0].rank() < 1) fail("operand 0 (x) must have rank >= 1");
      o.rank(1, 2);
      o.rank(2, 2);
      positive_int(a, "group_size");
      int64_t k = o.constant_dim(0, t[0].rank() - 1);
      check_int4(o, 1, 2, t[1].shape[0], k, a.get_int("group_size"), 0);
      auto shape = t[0].shape;
      shape.back() = t[1].shape[0];
      return {f32(shape)};
    }
    case OpKind::HeadMatmul: {
      count(t, 2, 2);
      Operands o(t, {"x", "w"});
      o.floating(0);
      o.floating(1);
      o.rank(0, 3);
      o.rank(1, 3);
      o.dim(1, 0, t[0].shape[1], "heads of x");
      o.dim(1, 2, t[0].shape[2], "input features = last dim of x");
      return {f32({t[0].shape[0], t[0].shape[1], t[1].shape[1]})};
    }
    case OpKind::Embedding: {
      count(t, 2, 2);
      Operands o(t, {"ids", "table"});
      o.rank(0, 1);
      o.dtype(0, DType::I32);
      o.rank(1, 2);
      o.floating(1);
      return {f32({t[0].shape[0], t[1].shape[1]})};
    }
    case OpKind::Rope: {
      count(t, 2, 2);
      Operands o(t, {"x", "positions"});
      o.floating(0);
      if (t[0].rank() != 2 && t[0].rank() != 3)
        fail("operand 0 (x) has type " + t[0].str() + ", expected rank 2 or 3");
      int64_t d = o.constant_dim(0, t[0].rank() - 1);
      if (d % 2 != 0) fail("rotary dim " + std::to_string(d) + " is odd");
      o.rank(1, 1);
      o.dtype(1, DType::I32);
      o.dim(1, 0, t[0].shape[0], "rows of x");
      check_rope_attrs(a);
      return {f32(t[0].shape)};
    }
    case OpKind::MlaAttentionExpanded: {
      count(t, 5, 6);
      Operands o(t, {"q_nope", "q_rope", "k_nope", "k_rope", "v", "tree_mask"});
      for (size_t i = 0; i < 5; ++i) o.floating(i);
      o.rank(0, 3);
      const Dim& T = t[0].shape[0];
      const Dim& H = t[0].shape[1];
      o.rank(1, 3);
      o.dim(1, 0, T, "tokens");
      o.dim(1, 1, H, "heads");
      o.rank(2, 3);
      const Dim& N = t[2].shape[0];
      check_keys_cover_step(o, 2, N, T);
      o.dim(2, 1, H, "heads");
      o.dim(2, 2, t[0].shape[2], "nope dim of q_nope");
      o.rank(3, 2);
      o.dim(3, 0, N, "key rows");
      o.dim(3, 1, t[1].shape[2], "rope dim of q_rope");
      o.rank(4, 3);
      o.dim(4, 0, N, "key rows");
      o.dim(4, 1, H, "heads");
      if (t.size() == 6) check_mask(o, 5, T);
      a.get_float("scale");
      return {f32({T, H, t[4].shape[2]})};
    }
    case OpKind::MlaAttention: {
      count(t, 3, 4);
      Operands o(t, {"q_latent", "q_rope", "kv", "tree_mask"});
      for (size_t i = 0; i < 3; ++i) o.floating(i);
      o.rank(0, 3);
      o.rank(1, 3);
      o.rank(2, 2);
      const Dim& T = t[0].shape[0];
      const Dim& H = t[0].shape[1];
      int64_t lora = a.get_int("kv_lora_rank");
      o.dim(0, 2, Dim(lora), "kv_lora_rank");
      o.dim(1, 0, T, "tokens");
      o.dim(1, 1, H, "heads");
      int64_t rope = o.constant_dim(1, 2);
      check_keys_cover_step(o, 2, t[2].shape[0], T);
      o.dim(2, 1, Dim(lora + rope), "kv_lora_rank + rope dim");
      if (t.size() == 4) check_mask(o, 3, T);
      a.get_float("scale");
      return {f32({T, H, Dim(lora)})};
    }
    case OpKind::KvAppend: {
      count(t, 2, SIZE_MAX);
      Operands o(t, {"cache", "part"});
      o.rank(0, 2);
      int64_t width = o.constant_dim(0, 1);
      int64_t sum = 0;
      for (size_t i = 1; i < t.size(); ++i) {
        o.rank(i, 2);
        o.floating(i);
        o.dim(i, 0, t[1].shape[0], "rows of the first part");
        sum += o.constant_dim(i, 1);
      }
      if (sum != width)
        fail("parts are " + std::to_string(sum) + " columns wide, the cache " +
             std::to_string(width));
      return {Type{t[0].dtype, {t[0].shape[0] + t[1].shape[0], t[0].shape[1]}}};
    }
    case OpKind::KvCompact: {
      count(t, 3, 3);
      Operands o(t, {"cache", "step", "keep"});
      o.rank(0, 2);
      o.rank(1, 2);
      o.dtype(1, t[0].dtype);
      o.dim(1, 1, t[0].shape[1], "cache row width");
      o.rank(2, 1);
      o.dtype(2, DType::I32);
      return {Type{t[0].dtype, {t[0].shape[0] + t[2].shape[0], t[0].shape[1]}}};
    }
    case OpKind::GqaAttention: {
      count(t, 3, 3);
      Operands o(t, {"q", "k", "v"});
      for (size_t i = 0; i < 3; ++i) {
        o.floating(i);
        o.rank(i, 3);
      }
      o.dim(1, 2, t[0].shape[2], "head dim of q");
      o.dim(2, 0, t[1].shape[0], "key rows");
      o.dim(2, 1, t[1].shape[1], "kv heads");
      int64_t hq = o.constant_dim(0, 1), hkv = o.constant_dim(1, 1);
      if (hkv <= 0 || hq % hkv != 0)
        fail("query heads " + std::to_string(hq) + " are not a multiple of kv heads " +
             std::to_string(hkv));
      a.get_float("scale");
      if (a.has("context_window")) {
        // The last Tq keys are the queries' own rows (the block), the ones before the context.
        if (a.get_int("context_window") < 0) fail("attribute 'context_window' must be >= 0 (0: the whole context)");
        const std::optional<Dim> context = subtract(t[1].shape[0], t[0].shape[0]);
        if (!context || (context->is_constant() && context->value() < 0))
          fail("context_window needs the queries' own rows last among the keys: " + t[1].shape[0].str() +
               " key rows, " + t[0].shape[0].str() + " queries");
      }
      return {f32({t[0].shape[0], t[0].shape[1], t[2].shape[2]})};
    }
    case OpKind::MoeRouter: {
      count(t, 2, 2);
      Operands o(t, {"logits", "bias"});
      o.rank(0, 2);
      o.dtype(0, DType::F32);
      o.rank(1, 1);
      o.floating(1);
      int64_t e = o.constant_dim(0, 1);
      o.dim(1, 0, Dim(e), "experts");
      int64_t k = a.get_int("top_k"), groups = a.get_int("n_group"),
              topk_group = a.get_int("topk_group");
      a.get_bool("norm_topk_prob");
      a.get_float("routed_scaling_factor");
      if (groups <= 0 || e % groups != 0)
        fail("n_group " + std::to_string(groups) + " does not divide " + std::to_string(e) +
             " experts");
      if (topk_group <= 0 || topk_group > groups)
        fail("topk_group " + std::to_string(topk_group) + " not in [1, n_group]");
      if (groups > 1 && e / groups < 2)
        fail("groups of fewer than 2 experts cannot be scored by their top 2");
      if (k <= 0 || k > topk_group * (e / groups))
        fail("top_k " + std::to_string(k) + " exceeds the experts of the kept groups");
      const Dim& T = t[0].shape[0];
      return {f32({T, Dim(k)}), Type{DType::I32, {T, Dim(k)}}};
    }
    case OpKind::MoeExperts:
    case OpKind::MoeExpertsInt4: {
      bool int4 = kind == OpKind::MoeExpertsInt4;
      count(t, int4 ? 9 : 6, int4 ? 9 : 6);
      Operands o(t, int4 ? std::vector<std::string>{"x", "weights", "ids", "gate_packed",
                                                    "gate_scale", "up_packed", "up_scale",
                                                    "down_packed", "down_scale"}
                         : std::vector<std::string>{"x", "weights", "ids", "gate", "up", "down"});
      o.rank(0, 2);
      o.floating(0);
      const Dim& T = t[0].shape[0];
      int64_t h = o.constant_dim(0, 1);
      o.rank(1, 2);
      o.dtype(1, DType::F32);
      o.dim(1, 0, T, "tokens");
      o.rank(2, 2);
      o.dtype(2, DType::I32);
      o.dim(2, 0, T, "tokens");
      o.dim(2, 1, t[1].shape[1], "top_k of weights");
      for (size_t i = 3; i < t.size(); ++i) o.rank(i, 3);
      if (!int4) {
        for (size_t i = 3; i < 6; ++i) o.floating(i);
        const Dim& E = t[3].shape[0];
        const Dim& I = t[3].shape[1];
        o.dim(3, 2, Dim(h), "hidden");
        for (size_t d = 0; d < 3; ++d) o.dim(4, d, t[3].shape[d], "as gate");
        o.dim(5, 0, E, "experts");
        o.dim(5, 1, Dim(h), "hidden");
        o.dim(5, 2, I, "expert intermediate");
      } else {
        positive_int(a, "group_size");
        int64_t g = a.get_int("group_size");
        const Dim& E = t[3].shape[0];
        const Dim& I = t[3].shape[1];
        int64_t inter = o.constant_dim(3, 1);
        for (size_t i = 4; i < 9; ++i) o.dim(i, 0, E, "experts");
        check_int4(o, 3, 4, I, h, g, 1);
        check_int4(o, 5, 6, I, h, g, 1);
        check_int4(o, 7, 8, Dim(h), inter, g, 1);
      }
      return {f32({T, Dim(h)})};
    }
    case OpKind::Argmax: {
      count(t, 1, 1);
      Operands o(t, {"x"});
      o.rank(0, 2);
      o.floating(0);
      return {Type{DType::I32, {t[0].shape[0]}}};
    }
    case OpKind::TopK: {
      count(t, 1, 1);
      Operands o(t, {"x"});
      o.rank(0, 2);
      o.floating(0);
      positive_int(a, "k");
      Dim k(a.get_int("k"));
      return {f32({t[0].shape[0], k}), Type{DType::I32, {t[0].shape[0], k}}};
    }
    case OpKind::LogSoftmax: {
      count(t, 1, 1);
      Operands o(t, {"x"});
      o.rank(0, 2);
      o.floating(0);
      return {f32(t[0].shape)};
    }
  }
  fail("unknown op kind");
}

}  // namespace kplan::ir
