// A sharded checkpoint's model.safetensors.index.json as SafetensorsCheckpoint::open(DIR) reads
// it: the fuzzed bytes are the index; the folder also holds a few valid shards written by the
// project's own writer (write_sharded_safetensors), so an index that names them opens them and
// every tensor it maps is checked against the shard that holds it. Shard names are untrusted
// paths: one that leaves the folder (`..`, `/`, `a/b`) must be refused, never opened.
//
// KPLAN_FUZZ_SEED_OUT=FILE: also write the valid index of those shards there (tests/fuzz/make_seeds.sh).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "compiler/frontend/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

using namespace kplan;

namespace {

const std::filesystem::path& checkpoint_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = fuzz::scratch_dir() / "ckpt";
    std::filesystem::create_directories(d);
    auto tensor = [](std::string name, DType dtype, std::vector<int64_t> shape) {
      TensorData t{std::move(name), dtype, std::move(shape), {}};
      int64_t n = 1;
      for (int64_t s : t.shape) n *= s;
      t.bytes.resize(static_cast<size_t>(n) * dtype_size(dtype));
      for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
      return t;
    };
    write_sharded_safetensors(d,
                              {tensor("model.embed_tokens.weight", DType::BF16, {4, 8}),
                               tensor("model.norm.weight", DType::BF16, {8}),
                               tensor("model.layers.0.mlp.gate.e_score_correction_bias", DType::F32, {4}),
                               tensor("lm_head.weight", DType::BF16, {4, 8}),
                               tensor("model.layers.0.mlp.experts.0.down_proj.weight_packed", DType::I32, {8, 1})},
                              /*max_shard_bytes=*/64);
    if (const char* out = std::getenv("KPLAN_FUZZ_SEED_OUT"))
      std::filesystem::copy_file(d / "model.safetensors.index.json", out,
                                 std::filesystem::copy_options::overwrite_existing);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = checkpoint_dir();
  fuzz::write_file(dir / "model.safetensors.index.json", fuzz::as_text(data, size));
  volatile uint64_t sink = 0;
  fuzz::refuse_cleanly([&] {
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir);
    for (const std::string& name : ckpt.names()) {
      const TensorView& t = ckpt.get(name);
      if (std::filesystem::path(t.file).parent_path() != dir)
        fuzz::finding("tensor " + name + " was read from " + t.file + ", outside the checkpoint folder");
      for (uint8_t b : t.bytes) sink = sink + b;
    }
    for (const auto& [k, v] : ckpt.metadata()) sink = sink + k.size() + v.size();
  });
  return 0;
}
