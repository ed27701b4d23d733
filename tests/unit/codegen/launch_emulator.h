#pragma once
// A CPU emulator of lowered launch sequences, for CI (no GPU): each kernel family's math as its
// template's doc block states it, fed by the launch's own arguments (slots + offsets, weights,
// scalars, step inputs) in one host arena. Running a lowered plan through it and comparing with
// the CPU reference checks the lowering (strides, offsets, argument order, slot reuse) end to
// end; gpu_ops_test.cc checks the CUDA templates against the same math on the device.
#include <cmath>
#include <cstring>
#include <vector>

#include "compiler/codegen/launch_geometry.h"
#include "compiler/plan/lowered_plan.h"
#include "ir/support/dtype.h"
#include "ir/support/error.h"

namespace kplan::codegen::testing_util {

class LaunchEmulator {
 public:
  explicit LaunchEmulator(plan::LoweredPlan& lp) : lp_(lp) {
    plan::assign_arena_offsets(lp_.buffers);
    arena_.assign(lp_.buffers.arena_size, 0);
  }

  uint8_t* slot(uint32_t index) { return arena_.data() + lp_.buffers.slots.at(index).offset; }
  uint8_t* step_input(plan::StepInputKind k) {
    for (const plan::StepInputBinding& b : lp_.step_inputs)
      if (b.kind == k) return slot(b.slot);
    throw Error("emulator: step input not bound");
  }
  template <typename T>
  void write_input(plan::StepInputKind k, const std::vector<T>& v) {
    std::memcpy(step_input(k), v.data(), v.size() * sizeof(T));
  }

  void run(const plan::Bucket& b) {
    for (const plan::Launch& l : b.launches) run_launch(l);
  }
  // One launch (tests that step through a bucket).
  void run_launch(const plan::Launch& l);
  const std::vector<uint8_t>& arena() const { return arena_; }

  std::vector<float> output(const plan::StepOutput& o) {
    std::vector<float> v(o.rows * o.cols);
    std::memcpy(v.data(), slot(o.slot) + o.offset, v.size() * 4);
    return v;
  }

 private:
  struct Args {
    std::vector<void*> p;
    std::vector<int64_t> i;
    std::vector<float> f;
  };

  static float ld(const void* p, int64_t i, int64_t dt) {
    if (dt == 0) return static_cast<const float*>(p)[i];
    return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  static void st(void* p, int64_t i, int64_t dt, float v) {
    if (dt == 0) {
      static_cast<float*>(p)[i] = v;
    } else {
      static_cast<uint16_t*>(p)[i] = float_to_bf16(v);
    }
  }
  static float bf(const void* p, int64_t i) { return ld(p, i, 1); }
  static float silu(float x) { return x / (1.f + std::exp(-x)); }
  static float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
  static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }
  // INT4 weight (row r of a [rows, K] packed matrix), as weight_dot.cuh dequantises it.
  static float int4_w(const void* packed, const void* scale, int64_t row, int64_t k, int64_t K) {
    const uint32_t word = static_cast<const uint32_t*>(packed)[row * (K / 8) + k / 8];
    const int q = static_cast<int>((word >> (4 * (k % 8))) & 15u) - 8;
    return static_cast<float>(q) * bf(scale, row * (K / 32) + k / 32);
  }

  void run_launch_impl(const plan::Launch& l) {
    const KernelSource& k = lp_.kernels.at(l.kernel);
    Args a;
    for (const plan::LaunchArg& arg : l.args) {
      switch (arg.kind) {
        case plan::ArgKind::Buffer: a.p.push_back(slot(arg.index) + arg.offset); break;
        case plan::ArgKind::Weight: a.p.push_back(const_cast<uint8_t*>(lp_.weights.at(arg.index).data().data()) + arg.offset); break;
        case plan::ArgKind::StepInput: a.p.push_back(step_input(static_cast<plan::StepInputKind>(arg.index))); break;
        case plan::ArgKind::I32:
        case plan::ArgKind::I64: a.i.push_back(arg.ival); break;
        case plan::ArgKind::F32: a.f.push_back(arg.fval); break;
      }
    }
    auto P = [&](const char* n) { return kernel_param(k, n); };
    const std::string& f = k.family;
    if (f == "embedding") {
      const int64_t H = P("H");
      for (int64_t t = 0; t < a.i[0]; ++t) {
        const int64_t id = clampi(static_cast<int32_t*>(a.p[0])[t], 0, a.i[1] - 1);
        for (int64_t j = 0; j < H; ++j) st(a.p[2], t * H + j, P("OUT_DT"), bf(a.p[1], id * H + j));
      }
    } else if (f == "rms_norm") {
      const int64_t D = P("D");
      for (int64_t r = 0; r < a.i[0]; ++r) {
        float ss = 0;
        for (int64_t j = 0; j < D; ++j) ss += ld(a.p[0], r * a.i[1] + j, P("X_DT")) * ld(a.p[0], r * a.i[1] + j, P("X_DT"));
        const float inv = 1.f / std::sqrt(ss / D + a.f[0]);
        for (int64_t j = 0; j < D; ++j) st(a.p[2], r * a.i[2] + j, P("Y_DT"), bf(a.p[1], j) * (ld(a.p[0], r * a.i[1] + j, P("X_DT")) * inv));
      }
    } else if (f == "matmul") {
      const int64_t K = P("K"), N = P("N"), batch = l.grid[2];
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < a.i[0]; ++t)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t kk = 0; kk < K; ++kk) {
              const int64_t w = b * a.i[5] + (P("W_LAYOUT") == 0 ? n * K + kk : kk * N + n);
              s += static_cast<double>(ld(a.p[0], b * a.i[2] + t * a.i[1] + kk, P("X_DT"))) * bf(a.p[1], w);
            }
            const int64_t o = b * a.i[4] + t * a.i[3] + n;
            st(a.p[2], o, P("Y_DT"), static_cast<float>((P("ACC") ? ld(a.p[2], o, P("Y_DT")) : 0.f) + s));
          }
    } else if (f == "rope") {
      const int64_t D = P("ROPE_DIM"), H = P("HEADS"), half = D / 2;
      for (int64_t t = 0; t < a.i[0]; ++t) {
        const float pos = static_cast<float>(static_cast<int32_t*>(a.p[2])[t]);
        for (int64_t h = 0; h < H; ++h) {
          std::vector<float> out(D);
          for (int64_t i = 0; i < half; ++i) {
            const float fr = std::pow(a.f[0], static_cast<float>(2 * i) / D);
            float inv = 1.f / fr;
            if (a.f[1] != 1.f) {
              const float ramp = std::min(std::max((i - a.f[2]) / (a.f[3] - a.f[2]), 0.f), 1.f);
              inv = (1.f / (a.f[1] * fr)) * ramp + inv * (1.f - ramp);
            }
            const float c = std::cos(pos * inv) * a.f[4], s = std::sin(pos * inv) * a.f[4];
            const int64_t ia = P("INTERLEAVED") ? 2 * i : i, ib = P("INTERLEAVED") ? 2 * i + 1 : i + half;
            const float u = ld(a.p[0], t * a.i[1] + h * a.i[2] + ia, P("X_DT")), v = ld(a.p[0], t * a.i[1] + h * a.i[2] + ib, P("X_DT"));
            out[ia] = u * c - v * s;
            out[ib] = v * c + u * s;
          }
          for (int64_t j = 0; j < D; ++j) st(a.p[1], t * a.i[3] + h * a.i[4] + j, P("Y_DT"), out[j]);
        }
      }
    } else if (f == "kv_append") {
      const int64_t C = P("C"), R = P("R");
      for (int64_t t = 0; t < a.i[0]; ++t) {
        const int64_t row = clampi(static_cast<int32_t*>(a.p[3])[0] + t, 0, a.i[3] - 1);
        for (int64_t j = 0; j < C + R; ++j) {
          const float v = j < C ? ld(a.p[0], t * a.i[1] + j, P("SRC_DT")) : ld(a.p[1], t * a.i[2] + j - C, P("SRC_DT"));
          st(a.p[2], row * (C + R) + j, P("KV_DT"), v);
        }
      }
    } else if (f == "mla_attention") {
      const int64_t H = P("HEADS"), C = P("C"), R = P("R"), T = a.i[0], past = static_cast<int32_t*>(a.p[3])[0];
      const uint32_t* mask = static_cast<uint32_t*>(a.p[4]);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          std::vector<double> score;
          std::vector<int64_t> keys;
          for (int64_t s = 0; s < past + T; ++s) {
            if (s >= past) {
              const int64_t j = s - past;
              if (!(mask ? (mask[t * a.i[5] + j / 32] >> (j % 32)) & 1u : j <= t)) continue;
            }
            double d = 0;
            for (int64_t c = 0; c < C; ++c) d += ld(a.p[0], t * a.i[1] + h * C + c, P("Q_DT")) * ld(a.p[2], s * (C + R) + c, P("KV_DT"));
            for (int64_t r = 0; r < R; ++r) d += ld(a.p[1], t * a.i[2] + h * a.i[3] + r, P("Q_DT")) * ld(a.p[2], s * (C + R) + C + r, P("KV_DT"));
            score.push_back(d * a.f[0]);
            keys.push_back(s);
          }
          double m = -1e300, sum = 0;
          for (double x : score) m = std::max(m, x);
          for (double& x : score) sum += (x = std::exp(x - m));
          for (int64_t c = 0; c < C; ++c) {
            double v = 0;
            for (size_t q = 0; q < keys.size(); ++q) v += score[q] / sum * ld(a.p[2], keys[q] * (C + R) + c, P("KV_DT"));
            st(a.p[5], t * a.i[4] + h * C + c, P("O_DT"), static_cast<float>(v));
          }
        }
    } else if (f == "add") {
      const int64_t D = P("D");
      for (int64_t o = 0; o < a.i[0] * D; ++o) st(a.p[2], o, P("O_DT"), ld(a.p[0], o, P("A_DT")) + ld(a.p[1], o, P("B_DT")));
    } else if (f == "swiglu") {
      const int64_t I = P("I");
      for (int64_t t = 0; t < a.i[0]; ++t)
        for (int64_t i = 0; i < I; ++i)
          st(a.p[2], t * a.i[3] + i, P("O_DT"), silu(ld(a.p[0], t * a.i[1] + i, P("G_DT"))) * ld(a.p[1], t * a.i[2] + i, P("U_DT")));
    } else if (f == "moe_router") {
      const int64_t E = P("E"), K = P("TOPK"), G = P("N_GROUP"), TG = P("TOPK_GROUP"), gs = E / G;
      const float* logits = static_cast<float*>(a.p[0]);
      const float* bias = static_cast<float*>(a.p[1]);
      for (int64_t t = 0; t < a.i[0]; ++t) {
        std::vector<float> c(E);
        for (int64_t e = 0; e < E; ++e) c[e] = sigmoid(logits[t * E + e]) + bias[e];
        if (G > 1) {
          std::vector<std::pair<float, int64_t>> g(G);
          for (int64_t q = 0; q < G; ++q) {
            std::vector<float> v(c.begin() + q * gs, c.begin() + (q + 1) * gs);
            std::sort(v.rbegin(), v.rend());
            g[q] = {v[0] + (gs > 1 ? v[1] : -INFINITY), q};
          }
          std::sort(g.begin(), g.end(), [](auto x, auto y) { return x.first > y.first || (x.first == y.first && x.second < y.second); });
          std::vector<bool> keep(G, false);
          for (int64_t q = 0; q < TG; ++q) keep[g[q].second] = true;
          for (int64_t e = 0; e < E; ++e) if (!keep[e / gs]) c[e] = 0.f;
        }
        std::vector<int64_t> order(E);
        for (int64_t e = 0; e < E; ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return c[x] > c[y]; });
        float sum = 0;
        for (int64_t j = 0; j < K; ++j) sum += sigmoid(logits[t * E + order[j]]);
        for (int64_t j = 0; j < K; ++j) {
          static_cast<int32_t*>(a.p[2])[t * K + j] = static_cast<int32_t>(order[j]);
          const float w = sigmoid(logits[t * E + order[j]]);
          static_cast<float*>(a.p[3])[t * K + j] = (P("NORM") ? w / (sum + 1e-20f) : w) * a.f[0];
        }
      }
    } else if (f == "moe_gate_up") {
      const int64_t H = P("H"), I = P("I"), K = P("TOPK");
      for (int64_t t = 0; t < a.i[0]; ++t)
        for (int64_t j = 0; j < K; ++j) {
          const int64_t e = clampi(static_cast<int32_t*>(a.p[1])[t * K + j], 0, a.i[2] - 1);
          for (int64_t i = 0; i < I; ++i) {
            double g = 0, u = 0;
            for (int64_t h = 0; h < H; ++h) {
              const float x = ld(a.p[0], t * a.i[1] + h, P("X_DT"));
              g += x * expert_w(a.p[2], a.p[3], e * I + i, h, H, P("W_FMT"));
              u += x * expert_w(a.p[4], a.p[5], e * I + i, h, H, P("W_FMT"));
            }
            static_cast<float*>(a.p[6])[(t * K + j) * I + i] = silu(static_cast<float>(g)) * static_cast<float>(u);
          }
        }
    } else if (f == "moe_down") {
      const int64_t H = P("H"), I = P("I"), K = P("TOPK");
      for (int64_t t = 0; t < a.i[0]; ++t)
        for (int64_t o = 0; o < H; ++o) {
          double total = 0;
          for (int64_t j = 0; j < K; ++j) {
            const int64_t e = clampi(static_cast<int32_t*>(a.p[1])[t * K + j], 0, a.i[2] - 1);
            double d = 0;
            for (int64_t i = 0; i < I; ++i) d += static_cast<float*>(a.p[0])[(t * K + j) * I + i] * expert_w(a.p[3], a.p[4], e * H + o, i, I, P("W_FMT"));
            total += static_cast<float*>(a.p[2])[t * K + j] * d;
          }
          const int64_t idx = t * a.i[1] + o;
          st(a.p[5], idx, P("Y_DT"), static_cast<float>((P("ACC") ? ld(a.p[5], idx, P("Y_DT")) : 0.f) + total));
        }
    } else {
      throw Error("emulator: no emulation of kernel family " + f);
    }
  }

  static float expert_w(const void* w, const void* scale, int64_t row, int64_t k, int64_t K, int64_t fmt) {
    return fmt == 0 ? bf(w, row * K + k) : int4_w(w, scale, row, k, K);
  }

  plan::LoweredPlan& lp_;
  std::vector<uint8_t> arena_;
};

inline void LaunchEmulator::run_launch(const plan::Launch& l) { run_launch_impl(l); }

}  // namespace kplan::codegen::testing_util
