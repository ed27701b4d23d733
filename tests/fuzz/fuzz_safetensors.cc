// One .safetensors file as a checkpoint shard is opened (SafetensorsCheckpoint::open on the
// file: the 8-byte header length, the bounded JSON header, every tensor's dtype, shape and
// data_offsets), then every tensor's bytes touched where the compiler reads them: the span must
// lie in the mapping (ASan sees a read past it) and match numel x dtype size; float tensors are
// widened to f32 and narrowed to bf16 as the checkpoint loader does.
#include <cstring>

#include "compiler/frontend/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

using namespace kplan;

namespace {

uint64_t touch(std::span<const uint8_t> bytes) {
  uint64_t sum = 0;
  for (uint8_t b : bytes) sum = sum * 31 + b;
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = fuzz::scratch_dir() / "model.safetensors";
  fuzz::write_file(path, fuzz::as_text(data, size));
  volatile uint64_t sink = 0;
  fuzz::refuse_cleanly([&] {
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(path);
    for (const std::string& name : ckpt.names()) {
      const TensorView& t = ckpt.get(name);
      if (static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype) != t.bytes.size())
        fuzz::finding("tensor " + name + ": byte span differs from numel x dtype size");
      sink = sink + touch(t.bytes);
      if (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16) {
        const DType was = t.dtype;
        ckpt.widen_to_f32(name);
        if (ckpt.get(name).bytes.size() != static_cast<uint64_t>(t.numel()) * 4)
          fuzz::finding("tensor " + name + ": widened to f32 with the wrong size");
        ckpt.narrow_to_bf16(name);
        sink = sink + touch(ckpt.get(name).bytes) + static_cast<uint64_t>(was);
      }
    }
    for (const auto& [k, v] : ckpt.metadata()) sink = sink + k.size() + v.size();
  });
  return 0;
}
