#include "runtime/cpu/synthetic_weights.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "ir/support/error.h"
#include "ir/support/synthetic_values.h"

namespace kplan::cpu {
namespace {

namespace s = synthetic;

const plan::SyntheticInit& init_of(const plan::Weight& w) {
  if (!w.synthetic) throw Error("weight " + w.name + " is not synthetic");
  return *w.synthetic;
}

// Unit i of the weight as the device stores it: bf16 / f32 bits, a packed word or a bf16 scale.
// Packed words of one group share its scale, computed once per group (`group_scale` caches it).
struct UnitWriter {
  const plan::Weight& w;
  const plan::SyntheticInit& init;
  uint64_t key;
  float step;
  uint64_t cached_group = ~uint64_t{0};
  float cached_scale = 0.0f;

  UnitWriter(const plan::Weight& weight)
      : w(weight), init(init_of(weight)), key(s::weight_key(init.seed, init.stream)), step(s::step_for(init.stddev)) {}

  float value(uint64_t i) const { return s::value(key, i, init.mean, step); }
  float scale_of_group(uint64_t g) {
    if (g != cached_group) {
      cached_scale = s::from_bf16(s::int4_scale(key, g, static_cast<int>(init.group_size), step));
      cached_group = g;
    }
    return cached_scale;
  }
  uint32_t word(uint64_t j) { return s::int4_word(key, j, scale_of_group(j / (init.group_size / 8)), step); }
};

// Runs body(first, last) over [0, n) split across the hardware threads.
template <class Body>
void parallel_units(uint64_t n, Body body) {
  const uint64_t threads = std::clamp<uint64_t>(std::thread::hardware_concurrency(), 1, 64);
  const uint64_t chunk = std::max<uint64_t>((n + threads - 1) / threads, 1 << 16);
  std::vector<std::thread> pool;
  for (uint64_t first = chunk; first < n; first += chunk)
    pool.emplace_back([=] { body(first, std::min(n, first + chunk)); });
  body(0, std::min(n, chunk));
  for (std::thread& t : pool) t.join();
}

}  // namespace

std::vector<uint8_t> synthetic_bytes(const plan::Weight& w, uint64_t first, uint64_t count) {
  UnitWriter u(w);
  const uint64_t units = plan::synthetic_units(w);
  if (first > units || count > units - first)
    throw Error("weight " + w.name + ": units [" + std::to_string(first) + ", +" + std::to_string(count) + ") past its " +
                std::to_string(units));
  const size_t size = dtype_size(w.dtype);
  std::vector<uint8_t> out(count * size);
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t i = first + k;
    uint8_t* at = out.data() + k * size;
    if (u.init.kind == plan::SyntheticKind::Int4Packed) {
      const uint32_t word = u.word(i);
      std::memcpy(at, &word, 4);
    } else if (u.init.kind == plan::SyntheticKind::Int4Scale) {
      const uint16_t h = s::int4_scale(u.key, i, static_cast<int>(u.init.group_size), u.step);
      std::memcpy(at, &h, 2);
    } else if (w.dtype == DType::BF16) {
      const uint16_t h = s::to_bf16(u.value(i));
      std::memcpy(at, &h, 2);
    } else {
      const float f = u.value(i);
      std::memcpy(at, &f, 4);
    }
  }
  return out;
}

std::vector<float> synthetic_floats(const plan::Weight& w) {
  const plan::SyntheticInit& init = init_of(w);
  if (init.kind == plan::SyntheticKind::Int4Packed) throw Error("weight " + w.name + ": packed INT4 words are not floats");
  const uint64_t n = plan::synthetic_units(w);
  std::vector<float> out(n);
  parallel_units(n, [&](uint64_t first, uint64_t last) {
    UnitWriter u(w);
    for (uint64_t i = first; i < last; ++i) {
      if (init.kind == plan::SyntheticKind::Int4Scale)
        out[i] = s::from_bf16(s::int4_scale(u.key, i, static_cast<int>(init.group_size), u.step));
      else
        out[i] = w.dtype == DType::BF16 ? s::from_bf16(s::to_bf16(u.value(i))) : u.value(i);
    }
  });
  return out;
}

std::vector<int32_t> synthetic_words(const plan::Weight& w) {
  if (init_of(w).kind != plan::SyntheticKind::Int4Packed) throw Error("weight " + w.name + " is not packed INT4");
  const uint64_t n = plan::synthetic_units(w);
  std::vector<int32_t> out(n);
  parallel_units(n, [&](uint64_t first, uint64_t last) {
    UnitWriter u(w);
    for (uint64_t i = first; i < last; ++i) out[i] = static_cast<int32_t>(u.word(i));
  });
  return out;
}

}  // namespace kplan::cpu
