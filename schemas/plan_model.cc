#include "schemas/plan_model.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "ir/support/error.h"
#include "ir/support/synthetic_values.h"
#include "schemas/launch_checks.h"

namespace kplan::plan {

const KernelBinary* Kernel::binary_for(const std::string& arch) const {
  for (const KernelBinary& b : binaries)
    if (b.arch == arch) return &b;
  return nullptr;
}

std::optional<int64_t> Kernel::constant(const std::string& name) const {
  for (const KernelConstant& c : constants)
    if (c.name == name) return c.value;
  return std::nullopt;
}

std::optional<size_t> Kernel::param_index(const std::string& name) const {
  for (size_t i = 0; i < param_names.size(); ++i)
    if (param_names[i] == name) return i;
  return std::nullopt;
}

int64_t Plan::weight_index(const std::string& name) const { return weight_index("target", name); }

int64_t Plan::weight_index(const std::string& source, const std::string& name) const {
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].source == source && weights[i].name == name) return static_cast<int64_t>(i);
  return -1;
}

const Bucket* Plan::bucket_for(const std::string& program, int64_t tokens) const {
  const Bucket* best = nullptr;
  for (const Bucket& b : buckets) {
    if (b.program != program || b.tokens < tokens) continue;
    if (!best || b.tokens < best->tokens) best = &b;
  }
  return best;
}

const StepInputBinding* Plan::step_input(StepInputKind kind) const {
  for (const StepInputBinding& s : step_inputs)
    if (s.kind == kind) return &s;
  return nullptr;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void assign_arena_offsets(BufferPlan& buffers) {
  uint64_t end = 0;
  for (BufferSlot& s : buffers.slots) {
    uint64_t a = s.alignment ? s.alignment : 1;
    s.offset = align_up(end, a);
    if (__builtin_add_overflow(s.offset, s.size, &end) || end > UINT64_MAX - 256)
      throw Error("plan: the arena overflows 64 bits at slot " + s.name + " (" + std::to_string(s.size) + " bytes)");
  }
  buffers.arena_size = align_up(end, 256);
}

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Pointer: return "ptr";
    case ParamType::I32: return "i32";
    case ParamType::I64: return "i64";
    case ParamType::F32: return "f32";
    case ParamType::TensorMap: return "tensor_map";
  }
  return "?";
}

const char* slot_role_name(SlotRole r) {
  switch (r) {
    case SlotRole::Scratch: return "scratch";
    case SlotRole::Persistent: return "persistent";
    case SlotRole::Input: return "input";
    case SlotRole::Output: return "output";
  }
  return "?";
}

const char* step_input_name(StepInputKind k) {
  switch (k) {
    case StepInputKind::Tokens: return "tokens";
    case StepInputKind::Positions: return "positions";
    case StepInputKind::TreeMask: return "tree_mask";
    case StepInputKind::CacheLength: return "cache_length";
    case StepInputKind::TokenCount: return "token_count";
  }
  return "?";
}

const char* arg_kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::Buffer: return "buffer";
    case ArgKind::Weight: return "weight";
    case ArgKind::I32: return "i32";
    case ArgKind::I64: return "i64";
    case ArgKind::F32: return "f32";
    case ArgKind::StepInput: return "step_input";
    case ArgKind::TensorMap: return "tensor_map";
  }
  return "?";
}

const char* swizzle_name(TensorMapSwizzle s) {
  switch (s) {
    case TensorMapSwizzle::None: return "none";
    case TensorMapSwizzle::B32: return "32B";
    case TensorMapSwizzle::B64: return "64B";
    case TensorMapSwizzle::B128: return "128B";
  }
  return "?";
}

const char* output_kind_name(OutputKind k) {
  switch (k) {
    case OutputKind::Logits: return "logits";
    case OutputKind::Hidden: return "hidden";
    case OutputKind::TokenIds: return "token_ids";
    case OutputKind::TopLogProbs: return "top_log_probs";
    case OutputKind::TopIds: return "top_ids";
    case OutputKind::RoundState: return "round_state";
  }
  return "?";
}

const char* synthetic_kind_name(SyntheticKind k) {
  switch (k) {
    case SyntheticKind::Normal: return "normal";
    case SyntheticKind::Int4Packed: return "int4_packed";
    case SyntheticKind::Int4Scale: return "int4_scale";
  }
  return "?";
}

uint64_t synthetic_units(const Weight& w) {
  uint64_t n = 1;
  for (int64_t d : w.shape) n *= static_cast<uint64_t>(d);
  return n;  // elements of the weight's own shape: values, words or scales
}

namespace {

uint64_t numel_of(const std::vector<int64_t>& shape, bool* overflow) {
  uint64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) *overflow = true;
  return n;
}

const KernelConstant* constant_of(const Kernel& k, const std::string& name) {
  for (const KernelConstant& c : k.constants)
    if (c.name == name) return &c;
  return nullptr;
}

// What is wrong with a synthetic weight's entry ("" when nothing): the kind against the dtype,
// shape and group; the parameters the generator's exactness needs; the kernel it names.
std::string synthetic_error(const Plan& plan, const Weight& w) {
  const SyntheticInit& s = *w.synthetic;
  const int kind = static_cast<int>(s.kind);
  if (kind > static_cast<int>(SyntheticKind::Int4Scale)) return "has an unknown synthetic kind " + std::to_string(kind);
  if (!w.data().empty()) return "is synthetic but also holds bytes";
  bool overflow = false;
  const uint64_t n = numel_of(w.shape, &overflow);
  uint64_t bytes = 0;
  if (overflow || __builtin_mul_overflow(n, dtype_size(w.dtype), &bytes)) return "has a shape whose size overflows";
  if (w.size != bytes) return "is synthetic with size " + std::to_string(w.size) + ", its dtype and shape make " + std::to_string(bytes);
  if (!std::isfinite(s.mean) || !std::isfinite(s.stddev) || s.stddev < 0)
    return "has a synthetic mean or stddev that is not finite (or a negative stddev)";
  const float step = synthetic::step_for(s.stddev);
  // The generator's double sum is exact only when mean and step are within 2^28 of each other.
  if (s.mean != 0.0f && !(std::fabs(static_cast<double>(s.mean)) <= std::ldexp(static_cast<double>(step), 28)))
    return "has a synthetic mean too large for its stddev (|mean| <= stddev / 37837 * 2^28)";
  const std::string kname = synthetic_kind_name(s.kind);
  int out_dt = 0;
  if (s.kind == SyntheticKind::Normal) {
    if (w.dtype != DType::F32 && w.dtype != DType::BF16) return "is synthetic " + kname + " with dtype " + std::string(dtype_name(w.dtype)) + " (f32 or bf16)";
    if (s.group_size != 0) return "is synthetic " + kname + " with a group size";
    out_dt = w.dtype == DType::BF16 ? 1 : 0;
  } else {
    if (s.group_size < 8 || s.group_size % 8 != 0 || s.group_size > static_cast<uint32_t>(synthetic::kMaxGroup))
      return "has synthetic INT4 group size " + std::to_string(s.group_size) + " (a multiple of 8 up to " + std::to_string(synthetic::kMaxGroup) + ")";
    if (w.shape.empty()) return "is synthetic " + kname + " without dimensions";
    if (s.mean != 0.0f) return "is synthetic " + kname + " with a nonzero mean (symmetric INT4 is centred)";
    const DType want = s.kind == SyntheticKind::Int4Packed ? DType::I32 : DType::BF16;
    if (w.dtype != want) return "is synthetic " + kname + " with dtype " + std::string(dtype_name(w.dtype)) + " (" + std::string(dtype_name(want)) + ")";
    // Packed: 8 values per word, so a row of words covers whole groups.
    if (s.kind == SyntheticKind::Int4Packed && (static_cast<uint64_t>(w.shape.back()) * 8) % s.group_size != 0)
      return "is synthetic " + kname + " with rows of " + std::to_string(w.shape.back()) + " words, not whole groups of " + std::to_string(s.group_size);
    out_dt = s.kind == SyntheticKind::Int4Scale ? 1 : 0;
  }
  if (s.kernel >= plan.kernels.size()) return "names synthetic kernel " + std::to_string(s.kernel) + " of " + std::to_string(plan.kernels.size());
  const Kernel& k = plan.kernels[s.kernel];
  const std::string kid = "synthetic kernel " + std::to_string(s.kernel) + " (" + k.id + ")";
  if (k.family != "synthetic_weights") return "names " + kid + ", which is not of family synthetic_weights";
  if (!std::equal(k.params.begin(), k.params.end(), std::begin(kSyntheticKernelParams), std::end(kSyntheticKernelParams)))
    return "names " + kid + ", whose parameters are not synthetic_weights' (out, n_lo, n_hi, key_lo, key_hi, mean, step)";
  const KernelConstant *ck = constant_of(k, "KIND"), *co = constant_of(k, "OUT_DT"), *cg = constant_of(k, "GROUP");
  if (!ck || !co || !cg || ck->value != kind || co->value != out_dt || cg->value != static_cast<int64_t>(s.group_size))
    return "names " + kid + ", which writes another kind, dtype or group than the weight's";
  return "";
}

// Bytes a step input needs for a bucket of `tokens` tokens.
uint64_t step_input_bytes(StepInputKind k, uint64_t tokens) {
  switch (k) {
    case StepInputKind::Tokens:
    case StepInputKind::Positions: return 4 * tokens;
    case StepInputKind::TreeMask: return 4 * tokens * ((tokens + 31) / 32);
    case StepInputKind::CacheLength:
    case StepInputKind::TokenCount: return 4;
  }
  return 0;
}

bool arg_matches(ArgKind a, ParamType p) {
  switch (a) {
    case ArgKind::Buffer:
    case ArgKind::Weight:
    case ArgKind::StepInput: return p == ParamType::Pointer;
    case ArgKind::I32: return p == ParamType::I32;
    case ArgKind::I64: return p == ParamType::I64;
    case ArgKind::F32: return p == ParamType::F32;
    case ArgKind::TensorMap: return p == ParamType::TensorMap;
  }
  return false;
}

}  // namespace

void validate_plan(const Plan& plan, const std::string& source) {
  auto fail = [&](const std::string& what) { throw Error(source + ": invalid plan: " + what); };
  const Header& h = plan.header;
  if (h.archs.empty()) fail("header lists no target arch");
  const ModelConfig& m = plan.model;
  if (m.vocab_size <= 0 || m.hidden_size <= 0 || m.num_hidden_layers <= 0)
    fail("the model spec has no vocabulary, hidden size or layers");

  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const Kernel& kern = plan.kernels[k];
    std::string name = "kernel " + std::to_string(k) + " (" + kern.id + ")";
    if (!kern.param_names.empty() && kern.param_names.size() != kern.params.size())
      fail(name + " has " + std::to_string(kern.param_names.size()) + " parameter names for " +
           std::to_string(kern.params.size()) + " parameters");
    if (!kern.library.empty()) {
      if (kern.library != "cublaslt") fail(name + " calls an unknown library '" + kern.library + "' (this runtime knows cublaslt)");
      if (!kern.binaries.empty()) fail(name + " is a " + kern.library + " call but carries cubins");
      continue;
    }
    if (kern.entry.empty()) fail(name + " has no entry name");
    for (const std::string& arch : h.archs) {
      const KernelBinary* b = kern.binary_for(arch);
      if (!b || b->cubin.empty()) fail(name + " has no cubin for " + arch);
    }
  }

  const BufferPlan& bp = plan.buffers;
  for (size_t s = 0; s < bp.slots.size(); ++s) {
    const BufferSlot& slot = bp.slots[s];
    std::string name = "buffer slot " + std::to_string(s) + " (" + slot.name + ")";
    if (slot.alignment == 0 || (slot.alignment & (slot.alignment - 1)) != 0)
      fail(name + " alignment " + std::to_string(slot.alignment) + " is not a power of two");
    if (slot.offset % slot.alignment != 0) fail(name + " offset is not aligned");
    if (slot.offset + slot.size > bp.arena_size || slot.offset + slot.size < slot.offset)
      fail(name + " ends past the arena (" + std::to_string(bp.arena_size) + " bytes)");
  }

  int64_t max_tokens = 0;
  for (const Bucket& b : plan.buckets) max_tokens = std::max<int64_t>(max_tokens, b.tokens);
  bool seen[kStepInputKinds] = {};
  for (const StepInputBinding& in : plan.step_inputs) {
    int k = static_cast<int>(in.kind);
    if (k < 0 || k >= kStepInputKinds) fail("unknown step input kind " + std::to_string(k));
    if (seen[k]) fail(std::string("step input ") + step_input_name(in.kind) + " bound twice");
    seen[k] = true;
    if (in.slot >= bp.slots.size())
      fail(std::string("step input ") + step_input_name(in.kind) + " names slot " +
           std::to_string(in.slot) + " of " + std::to_string(bp.slots.size()));
    uint64_t need = step_input_bytes(in.kind, static_cast<uint64_t>(max_tokens));
    if (bp.slots[in.slot].size < need)
      fail(std::string("step input ") + step_input_name(in.kind) + " slot holds " +
           std::to_string(bp.slots[in.slot].size) + " bytes, the largest bucket needs " +
           std::to_string(need));
  }

  for (const KvCache& kv : plan.kv_caches) {
    if (kv.slot >= bp.slots.size()) fail("KV cache " + kv.name + " names a missing slot");
    uint64_t bytes = 0;  // rows x row_bytes, refused when it wraps (a crafted plan may say 2^62 rows)
    if (__builtin_mul_overflow(kv.row_bytes, kv.rows, &bytes) || bytes > bp.slots[kv.slot].size)
      fail("KV cache " + kv.name + " (" + std::to_string(kv.rows) + " rows x " + std::to_string(kv.row_bytes) +
           " bytes) does not fit its slot");
  }

  for (size_t w = 0; w < plan.weights.size(); ++w) {
    const Weight& wt = plan.weights[w];
    for (int64_t d : wt.shape)
      if (d < 0) fail("weight " + wt.name + " has a negative dimension");
    if (wt.synthetic) {
      if (std::string e = synthetic_error(plan, wt); !e.empty()) fail("weight " + wt.name + " " + e);
      continue;
    }
    // Packed layouts may hold other than numel * dtype_size bytes: size is what the bytes hold.
    if (!wt.data().empty() && wt.data().size() != wt.size && wt.size != 0)
      fail("weight " + wt.name + " holds " + std::to_string(wt.data().size()) +
           " bytes but its table entry says " + std::to_string(wt.size));
  }

  for (const Bucket& b : plan.buckets) {
    std::string bname = "bucket " + b.program + "/" + std::to_string(b.tokens);
    if (b.tokens == 0) fail(bname + " has zero tokens");
    for (size_t i = 0; i < b.launches.size(); ++i) {
      const Launch& l = b.launches[i];
      std::string lname = bname + " launch " + std::to_string(i);
      if (l.kernel >= plan.kernels.size())
        fail(lname + " names kernel " + std::to_string(l.kernel) + " of " +
             std::to_string(plan.kernels.size()));
      const Kernel& kern = plan.kernels[l.kernel];
      lname += " (" + kern.id + ")";
      if (std::string e = launch_geometry_error(l); !e.empty()) fail(lname + " " + e);
      if (std::string e = tensor_maps_error(plan, l); !e.empty()) fail(lname + " " + e);
      if (l.args.size() != kern.params.size())
        fail(lname + " passes " + std::to_string(l.args.size()) + " arguments to " +
             std::to_string(kern.params.size()) + " parameters");
      for (size_t a = 0; a < l.args.size(); ++a) {
        const LaunchArg& arg = l.args[a];
        std::string aname = lname + " argument " + std::to_string(a);
        if (!arg_matches(arg.kind, kern.params[a]))
          fail(aname + " is a " + arg_kind_name(arg.kind) + " for a " +
               param_type_name(kern.params[a]) + " parameter");
        if (arg.kind == ArgKind::Buffer) {
          if (arg.index >= bp.slots.size()) fail(aname + " names a missing buffer slot");
          if (arg.offset > bp.slots[arg.index].size) fail(aname + " points past its slot");
        } else if (arg.kind == ArgKind::Weight) {
          if (arg.index >= plan.weights.size()) fail(aname + " names a missing weight");
          if (arg.offset > plan.weights[arg.index].size) fail(aname + " points past its weight");
        } else if (arg.kind == ArgKind::StepInput) {
          if (arg.index >= static_cast<uint32_t>(kStepInputKinds) || !seen[arg.index])
            fail(aname + " names a step input the plan does not bind");
        } else if (arg.kind == ArgKind::TensorMap) {
          if (arg.index >= l.tensor_maps.size()) fail(aname + " names a missing tensor map");
        }
      }
    }
    for (const StepOutput& o : b.outputs) {
      std::string oname = bname + " output " + output_kind_name(o.kind);
      if (o.slot >= bp.slots.size()) fail(oname + " names a missing slot");
      // rows and cols come from the file: a product past 64 bits must be refused, not wrapped.
      uint64_t elements = 0, bytes = 0;
      if (o.rows < 0 || o.cols < 0 ||
          __builtin_mul_overflow(static_cast<uint64_t>(o.rows), static_cast<uint64_t>(o.cols), &elements) ||
          __builtin_mul_overflow(elements, dtype_size(o.dtype), &bytes))
        fail(oname + " has a shape whose size overflows");
      if (bytes > bp.slots[o.slot].size || o.offset > bp.slots[o.slot].size - bytes) fail(oname + " does not fit its slot");
      // @draft's block row 0 is the bonus token: its outputs are the B - 1 rows after it.
      // A round's state is one row of words whatever the bucket.
      const int64_t rows = o.kind == OutputKind::RoundState ? 1
                           : b.program == "draft"           ? static_cast<int64_t>(b.tokens) - 1
                                                            : static_cast<int64_t>(b.tokens);
      if (o.rows != rows)
        fail(oname + " has " + std::to_string(o.rows) + " rows for " + std::to_string(b.tokens) +
             " tokens");
    }
  }
}

}  // namespace kplan::plan
