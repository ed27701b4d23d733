#pragma once
// The launch emulator's memory: one host arena holding every buffer slot at its planned offset,
// and the plan's weights, addressed as a launch addresses them (slot or weight + byte offset).
// Every element a launch touches must lie inside the slot or weight its argument names. Scratch
// and output slots are dead between steps, so each of their bytes carries the id of the value
// that wrote it in this step: a read of a byte no launch wrote, or one argument reading bytes of
// two different values, is slot reuse clobbering live data (or a stride running into a
// neighbour). A launch that reads a byte and then writes it (accumulation, in-place rope) updates
// the same value. Errors are kplan::Error naming the launch, the argument and the slot.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/passes/lowered_plan.h"
#include "ir/support/dtype.h"
#include "ir/support/error.h"

namespace kplan::codegen::testing_util {

// One pointer argument of a launch, resolved: a region (slot or weight) and a byte offset.
struct Operand {
  std::string arg;  // parameter name, for errors
  bool is_weight = false;
  uint32_t index = 0;   // slot or weight
  uint64_t offset = 0;  // bytes into the region
  uint32_t value = 0;   // the value id this argument read (0: none yet)
};

class EmulatorMemory {
 public:
  explicit EmulatorMemory(plan::LoweredPlan& lp) : lp_(lp) {
    plan::assign_arena_offsets(lp_.buffers);
    arena_.assign(lp_.buffers.arena_size, 0);
    value_.assign(lp_.buffers.arena_size, 0);
    read_in_.assign(lp_.buffers.arena_size, 0);
  }

  uint8_t* slot(uint32_t index) { return arena_.data() + lp_.buffers.slots.at(index).offset; }
  const std::vector<uint8_t>& arena() const { return arena_; }

  // A new step: scratch and output slots hold nothing live.
  void begin_step() {
    for (const plan::BufferSlot& s : lp_.buffers.slots)
      if (tracked(s)) std::fill_n(value_.begin() + s.offset, s.size, 0u);
  }
  // A new launch; `what` names it in errors.
  // Consecutive launches of one IR op ("op N: ..." notes: a concat's copy per part) write one value.
  void begin_launch(std::string what) {
    const std::string op = what.substr(0, what.find(':'));
    if (op != op_ || op.rfind("op ", 0) != 0) ++value_id_;
    op_ = op;
    what_ = std::move(what);
    ++launch_;
  }

  // Element `i` (of `bytes` bytes) of an operand: checked, recorded, returned.
  const uint8_t* read(Operand& o, int64_t i, size_t bytes) {
    if (o.is_weight) return weight_bytes(o, i, bytes);
    const uint64_t at = arena_offset(o, i, bytes);
    if (tracked(lp_.buffers.slots[o.index])) {
      const uint32_t v = value_[at];
      if (v == 0) fail(o, i, "reads bytes no launch of this step wrote");
      if (o.value != 0 && o.value != v) fail(o, i, "reads two different values through one argument (slot reuse clobbered live data?)");
      o.value = v;
      std::fill_n(read_in_.begin() + at, bytes, launch_);
    }
    return arena_.data() + at;
  }
  uint8_t* write(Operand& o, int64_t i, size_t bytes) {
    if (o.is_weight) fail(o, i, "writes into a weight");
    const uint64_t at = arena_offset(o, i, bytes);
    if (tracked(lp_.buffers.slots[o.index]))
      for (uint64_t b = at; b < at + bytes; ++b)
        if (read_in_[b] != launch_) value_[b] = value_id_;  // read here first: the same value, updated
    return arena_.data() + at;
  }

  float load(Operand& o, int64_t i, DType t) {
    if (t == DType::BF16) {
      uint16_t v;
      std::memcpy(&v, read(o, i, 2), 2);
      return bf16_to_float(v);
    }
    float v;
    std::memcpy(&v, read(o, i, 4), 4);
    return v;
  }
  void store(Operand& o, int64_t i, DType t, float v) {
    if (t == DType::BF16) {
      const uint16_t b = float_to_bf16(v);
      std::memcpy(write(o, i, 2), &b, 2);
    } else {
      std::memcpy(write(o, i, 4), &v, 4);
    }
  }
  uint32_t load_u32(Operand& o, int64_t i) {
    uint32_t v;
    std::memcpy(&v, read(o, i, 4), 4);
    return v;
  }
  int32_t load_i32(Operand& o, int64_t i) { return static_cast<int32_t>(load_u32(o, i)); }
  void store_i32(Operand& o, int64_t i, int32_t v) { std::memcpy(write(o, i, 4), &v, 4); }

 private:
  static bool tracked(const plan::BufferSlot& s) {
    return s.role == plan::SlotRole::Scratch || s.role == plan::SlotRole::Output;
  }
  [[noreturn]] void fail(const Operand& o, int64_t i, const std::string& why) const {
    const std::string region = o.is_weight ? "weight '" + lp_.weights.at(o.index).name + "'"
                                           : "slot '" + lp_.buffers.slots.at(o.index).name + "'";
    throw Error("emulator: " + what_ + ": argument " + o.arg + " element " + std::to_string(i) + " (" + region + " + " +
                std::to_string(o.offset) + " bytes) " + why);
  }
  uint64_t arena_offset(const Operand& o, int64_t i, size_t bytes) const {
    const plan::BufferSlot& s = lp_.buffers.slots.at(o.index);
    const int64_t at = static_cast<int64_t>(o.offset) + i * static_cast<int64_t>(bytes);
    if (i < 0 || at + static_cast<int64_t>(bytes) > static_cast<int64_t>(s.size))
      fail(o, i, "is outside its slot (" + std::to_string(s.size) + " bytes)");
    return s.offset + static_cast<uint64_t>(at);
  }
  const uint8_t* weight_bytes(const Operand& o, int64_t i, size_t bytes) const {
    const std::span<const uint8_t> w = lp_.weights.at(o.index).data();
    const int64_t at = static_cast<int64_t>(o.offset) + i * static_cast<int64_t>(bytes);
    if (i < 0 || at + static_cast<int64_t>(bytes) > static_cast<int64_t>(w.size()))
      fail(o, i, "is outside its weight (" + std::to_string(w.size()) + " bytes)");
    return w.data() + at;
  }

  plan::LoweredPlan& lp_;
  std::vector<uint8_t> arena_;
  std::vector<uint32_t> value_;    // per arena byte: the launch whose value it holds (0: none)
  std::vector<uint32_t> read_in_;  // per arena byte: the last launch that read it
  uint32_t launch_ = 0;
  uint32_t value_id_ = 0;  // the value launches of the current op write
  std::string op_;
  std::string what_;
};

}  // namespace kplan::codegen::testing_util
