// The kernel cache: warm compiles hit and give identical bytes; anything the cubin depends on
// (headers it includes, options, arch) changes the key; a damaged entry is detected, recompiled
// and repaired; entries appear only complete (temp file + rename).
#include <gtest/gtest.h>

#include <fstream>

#include "codegen_test_util.h"
#include "compiler/codegen/compile_kernels.h"
#include "compiler/codegen/kernel_cache.h"
#include "compiler/codegen/model_kernels.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

using testing_util::TempDir;

std::vector<KernelSource> two_kernels() {
  return {rms_norm_kernel(256, ElemType::F32, ElemType::F32), add_kernel(256, ElemType::F32, ElemType::F32, ElemType::F32)};
}

CompileOptions options_for(const TempDir& dir) {
  CompileOptions o;
  o.archs = {"sm_90"};
  o.cache_dir = dir.path();
  o.progress = [](const std::string&) {};
  return o;
}

int count_files(const std::filesystem::path& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

TEST(CodegenCache, SecondCompileHitsWithIdenticalBytes) {
  TempDir dir;
  CompileStats cold, warm;
  const auto first = compile_kernels(two_kernels(), options_for(dir), &cold);
  EXPECT_EQ(cold.hits, 0);
  EXPECT_EQ(cold.misses, 2);
  const auto second = compile_kernels(two_kernels(), options_for(dir), &warm);
  EXPECT_EQ(warm.hits, 2);
  EXPECT_EQ(warm.misses, 0);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_FALSE(first[i].cache_hit);
    EXPECT_TRUE(second[i].cache_hit);
    EXPECT_EQ(first[i].cubin, second[i].cubin);
    EXPECT_EQ(first[i].cache_key, second[i].cache_key);
  }
  // Only published entries, named by readable id and key; no temp files left behind.
  EXPECT_EQ(count_files(dir.path()), 2);
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind(".tmp", 0), std::string::npos) << name;
    EXPECT_NE(name.find("_sm90."), std::string::npos) << name;
  }
  EXPECT_NE(warm.summary().find("2 cached, 0 compiled"), std::string::npos) << warm.summary();
}

TEST(CodegenCache, DisabledCacheAlwaysCompiles) {
  TempDir dir;
  CompileOptions o = options_for(dir);
  o.use_cache = false;
  CompileStats s;
  compile_kernels(two_kernels(), o, &s);
  compile_kernels(two_kernels(), o, &s);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(count_files(dir.path()), 0);
}

TEST(CodegenCache, ChangedIncludedHeaderMissesOthersStillHit) {
  TempDir dir;
  compile_kernels(two_kernels(), options_for(dir));
  std::map<std::string, std::string> headers = TemplateLibrary::embedded().headers();
  headers["rms_norm.cuh"] += "\n// an edit\n";
  const TemplateLibrary edited(headers);
  CompileOptions o = options_for(dir);
  o.templates = &edited;
  CompileStats s;
  const auto out = compile_kernels(two_kernels(), o, &s);
  EXPECT_FALSE(out[0].cache_hit);  // rms_norm includes the edited header
  EXPECT_TRUE(out[1].cache_hit);   // add does not
  EXPECT_EQ(s.misses, 1);
  // An edit of a header both include (common.cuh) misses both.
  headers = TemplateLibrary::embedded().headers();
  headers["common.cuh"] += "\n// another edit\n";
  const TemplateLibrary edited_common(headers);
  o.templates = &edited_common;
  compile_kernels(two_kernels(), o, &s);
  EXPECT_EQ(s.misses, 2);
}

TEST(CodegenCache, ChangedOptionOrArchMisses) {
  TempDir dir;
  compile_kernels(two_kernels(), options_for(dir));
  CompileOptions o = options_for(dir);
  o.extra_nvrtc_options = {"-DKPLAN_CACHE_TEST=1"};
  CompileStats s;
  compile_kernels(two_kernels(), o, &s);
  EXPECT_EQ(s.misses, 2);
  o = options_for(dir);
  o.archs = {"sm_90", "sm_120"};
  compile_kernels(two_kernels(), o, &s);
  EXPECT_EQ(s.hits, 2);    // sm_90 entries from the first compile
  EXPECT_EQ(s.misses, 2);  // sm_120 is new
}

TEST(CodegenCache, KeyCoversSourceVersionArchOptionsAndHeaders) {
  const KernelSource k = rms_norm_kernel(256, ElemType::F32, ElemType::F32);
  const std::vector<HeaderFile> h = TemplateLibrary::embedded().includes_of(k.source);
  const std::vector<std::string> o = {"-std=c++17"};
  const std::string base = kernel_cache_key(k, h, "13.0", "sm_90", o);
  EXPECT_EQ(base, kernel_cache_key(k, h, "13.0", "sm_90", o));
  EXPECT_NE(base, kernel_cache_key(k, h, "13.1", "sm_90", o));
  EXPECT_NE(base, kernel_cache_key(k, h, "13.0", "sm_120", o));
  EXPECT_NE(base, kernel_cache_key(k, h, "13.0", "sm_90", {"-std=c++20"}));
  KernelSource other = k;
  other.source += "\n";
  EXPECT_NE(base, kernel_cache_key(other, h, "13.0", "sm_90", o));
  std::vector<HeaderFile> h2 = h;
  h2[0].second += " ";
  EXPECT_NE(base, kernel_cache_key(k, h2, "13.0", "sm_90", o));
}

void damage(const std::filesystem::path& file, bool truncate) {
  std::string data;
  {
    std::ifstream in(file, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (truncate) {
    data.resize(data.size() / 2);
  } else {
    data[data.size() - 100] ^= 0x5a;  // inside the cubin
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << data;
}

TEST(CodegenCache, CorruptEntryIsDetectedRecompiledAndRepaired) {
  for (bool truncate : {false, true}) {
    TempDir dir;
    const auto first = compile_kernels({two_kernels()[0]}, options_for(dir));
    const KernelCache cache(dir.path());
    const std::filesystem::path entry = cache.entry_path(first[0].cache_key, first[0].id);
    ASSERT_TRUE(std::filesystem::exists(entry));
    damage(entry, truncate);
    std::vector<uint8_t> bytes;
    EXPECT_EQ(cache.load(first[0].cache_key, first[0].id, bytes), KernelCache::Lookup::Corrupt);
    CompileStats s;
    const auto again = compile_kernels({two_kernels()[0]}, options_for(dir), &s);
    EXPECT_EQ(s.corrupt, 1);
    EXPECT_EQ(s.misses, 1);
    EXPECT_FALSE(again[0].cache_hit);
    EXPECT_EQ(again[0].cubin, first[0].cubin);
    compile_kernels({two_kernels()[0]}, options_for(dir), &s);
    EXPECT_EQ(s.hits, 1) << "the recompiled entry replaces the damaged one";
  }
}

TEST(CodegenCache, ForeignFileUnderTheEntryNameIsCorrupt) {
  TempDir dir;
  const KernelCache cache(dir.path());
  std::ofstream(cache.entry_path("0123456789abcdef", "x_sm90")) << "not a cache entry";
  std::vector<uint8_t> bytes;
  EXPECT_EQ(cache.load("0123456789abcdef", "x_sm90", bytes), KernelCache::Lookup::Corrupt);
  EXPECT_EQ(cache.load("fedcba9876543210", "x_sm90", bytes), KernelCache::Lookup::Miss);
  // A valid entry stored under another key is not accepted for this key.
  ASSERT_TRUE(cache.store("1111111111111111", "y_sm90", {1, 2, 3}));
  std::filesystem::rename(cache.entry_path("1111111111111111", "y_sm90"), cache.entry_path("2222222222222222", "y_sm90"));
  EXPECT_EQ(cache.load("2222222222222222", "y_sm90", bytes), KernelCache::Lookup::Corrupt);
}

TEST(CodegenCache, DefaultDirFollowsEnvironment) {
  const char* old = std::getenv("KPLAN_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("KPLAN_CACHE_DIR", "/tmp/kplan-cache-test-dir", 1);
  EXPECT_EQ(KernelCache::default_dir(), std::filesystem::path("/tmp/kplan-cache-test-dir"));
  unsetenv("KPLAN_CACHE_DIR");
  EXPECT_NE(KernelCache::default_dir().string().find("kplan"), std::string::npos);
  if (old) setenv("KPLAN_CACHE_DIR", saved.c_str(), 1);
}

TEST(CodegenCompileErrors, NvrtcFailureNamesTheKernelAndShowsTheLog) {
  TempDir dir;
  std::map<std::string, std::string> headers = TemplateLibrary::embedded().headers();
  headers["add.cuh"] += "\nthis is not C++;\n";
  const TemplateLibrary broken(headers);
  CompileOptions o = options_for(dir);
  o.templates = &broken;
  try {
    compile_kernels(two_kernels(), o);
    FAIL() << "a broken template compiled";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC failed to compile kernel add_d256"), std::string::npos) << msg;
    EXPECT_NE(msg.find("add.cuh"), std::string::npos) << msg;  // the log points at the header
    EXPECT_NE(msg.find("--gpu-architecture=sm_90"), std::string::npos) << msg;
  }
  EXPECT_THROW(compile_kernels(two_kernels(), [&] { auto x = options_for(dir); x.archs = {"sm_1"}; return x; }()), Error);
}

TEST(CodegenCompileErrors, MissingHeaderIsNamed) {
  std::map<std::string, std::string> headers = TemplateLibrary::embedded().headers();
  headers.erase("common.cuh");
  const TemplateLibrary lib(headers);
  try {
    lib.includes_of(two_kernels()[0].source);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'common.cuh'"), std::string::npos);
  }
}

}  // namespace
}  // namespace kplan::codegen
