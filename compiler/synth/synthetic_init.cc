#include "compiler/synth/synthetic_init.h"

#include <string>
#include <vector>

#include "compiler/synth/prng.h"
#include "compiler/synth/weight_init.h"
#include "ir/support/error.h"

namespace kplan {
namespace {

bool strip_suffix(const std::string& s, const std::string& suffix, std::string* rest) {
  if (s.size() < suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  *rest = s.substr(0, s.size() - suffix.size());
  return true;
}

}  // namespace

plan::SyntheticInit synthetic_init(const plan::Weight& w, uint64_t seed, int64_t group_size) {
  plan::SyntheticInit s;
  s.seed = seed;
  std::string module;
  const bool packed = strip_suffix(w.name, ".weight_packed", &module);
  const bool scale = !packed && strip_suffix(w.name, ".weight_scale", &module);
  if (packed || scale) {
    const DType want = packed ? DType::I32 : DType::BF16;
    if (w.dtype != want || w.shape.empty())
      throw Error("--synthetic-weights: INT4 part " + w.name + " is " + std::string(dtype_name(w.dtype)) + ", expected " +
                  std::string(dtype_name(want)));
    if (group_size < 8 || group_size % 8 != 0)
      throw Error("--synthetic-weights: INT4 part " + w.name + " has group size " + std::to_string(group_size) +
                  " (a multiple of 8 is generated)");
    // The module's float weight [..., out, in]: the rule of "<module>.weight" of that shape.
    std::vector<int64_t> shape = w.shape;
    shape.back() *= packed ? 8 : group_size;
    const InitRule rule = init_rule(module + ".weight", shape);
    s.kind = packed ? plan::SyntheticKind::Int4Packed : plan::SyntheticKind::Int4Scale;
    s.mean = 0.0f;  // symmetric INT4: init_rule gives projections mean 0
    s.stddev = static_cast<float>(rule.stddev);
    s.group_size = static_cast<uint32_t>(group_size);
    s.stream = fnv1a64(w.source + ":" + module);
    return s;
  }
  if (w.dtype != DType::F32 && w.dtype != DType::BF16)
    throw Error("--synthetic-weights: weight " + w.name + " (" + w.source + ") is " + std::string(dtype_name(w.dtype)) +
                ", which is not generated (f32, bf16 and compressed-tensors INT4 parts are)");
  const InitRule rule = init_rule(w.name, w.shape);
  s.kind = plan::SyntheticKind::Normal;
  s.mean = static_cast<float>(rule.mean);
  s.stddev = static_cast<float>(rule.stddev);
  s.stream = fnv1a64(w.source + ":" + w.name);
  return s;
}

}  // namespace kplan
