// A .kplan plan as `kplan inspect` / `kplan run` read it (plan::read_plan: the 64-byte prefix,
// every size and offset in it, the FlatBuffers verifier, the typed model spec, the weights table
// against the data section, the validator over slots, KV caches and launches), then every
// section `kplan inspect` prints.
//
// A crafted file carries valid checksums, so before reading, the target reseals what the
// mutation broke: the prefix checksum, and the metadata checksum when the prefix's metadata size
// lies inside the file. It then reads twice: with the weights' checksums verified (a mutated
// weight is refused there) and without (`inspect --no-verify`, where every weight's span must
// still lie in the mapping). The unsealed bytes are read once too, as a damaged file would be.
//
// KPLAN_FUZZ_SEED_FROM=IN KPLAN_FUZZ_SEED_OUT=OUT: write a seed instead (tests/fuzz/make_seeds.sh):
// the plan IN with each kernel's cubin cut to 16 bytes (the reader checks a cubin is there, not
// what it holds), rewritten by the project's plan writer, so the seed is small.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/support/checksum.h"
#include "runtime/plan_print.h"
#include "schemas/plan_file_format.h"
#include "schemas/plan_reader.h"
#include "schemas/plan_writer.h"
#include "tests/fuzz/fuzz_support.h"

using namespace kplan;

namespace {

std::string resealed(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() < plan::kPrefixSize) return bytes;
  plan::FilePrefix prefix;
  std::memcpy(&prefix, bytes.data(), sizeof prefix);
  if (prefix.flatbuffer_size <= bytes.size() - plan::kPrefixSize)
    prefix.flatbuffer_checksum = checksum64(bytes.data() + plan::kPrefixSize, prefix.flatbuffer_size);
  prefix.prefix_checksum = checksum64(&prefix, offsetof(plan::FilePrefix, prefix_checksum));
  std::memcpy(bytes.data(), &prefix, sizeof prefix);
  return bytes;
}

void read_and_print(const std::filesystem::path& path, bool verify_weights) {
  volatile uint64_t sink = 0;
  fuzz::refuse_cleanly([&] {
    const plan::Plan p = plan::read_plan(path, {verify_weights});
    for (const plan::Weight& w : p.weights)
      for (uint8_t b : w.view) sink = sink + b;
    for (plan::PlanSection s : {plan::PlanSection::Summary, plan::PlanSection::Ir, plan::PlanSection::Kernels,
                                plan::PlanSection::Memory, plan::PlanSection::Launches, plan::PlanSection::Weights})
      sink = sink + plan::describe_plan(p, s).size();
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* in = std::getenv("KPLAN_FUZZ_SEED_FROM");
  const char* out = std::getenv("KPLAN_FUZZ_SEED_OUT");
  if (!in || !out) return 0;
  plan::Plan p = plan::read_plan(in);
  for (plan::Kernel& k : p.kernels)
    for (plan::KernelBinary& b : k.binaries) b.cubin.resize(std::min<size_t>(b.cubin.size(), 16));
  plan::write_plan(p, out);
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = fuzz::scratch_dir() / "model.kplan";
  fuzz::write_file(path, fuzz::as_text(data, size));
  read_and_print(path, /*verify_weights=*/true);
  fuzz::write_file(path, resealed(data, size));
  read_and_print(path, /*verify_weights=*/true);
  read_and_print(path, /*verify_weights=*/false);
  return 0;
}
