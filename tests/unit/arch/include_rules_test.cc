// The arrows of the design card ("Who may include whom"): nothing under runtime/, schemas/ or
// ir/ includes compiler/, the public C folder includes only C standard headers, and the runtime
// library, linked alone (tests/unit/arch/probe), pulls in no compiler object and no NVRTC.
//
// Known exceptions, to be emptied when the work that removes them lands (each entry must still
// be a violation, so a stale entry fails too):
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kplan {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> includes_of(const fs::path& file) {
  static const std::regex include(R"(^\s*#\s*include\s*[<"]([^">]+)[">])");
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, include)) out.push_back(m[1]);
  }
  return out;
}

std::string set_text(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& e : s) out += "\n  " + e;
  return out;
}

TEST(Arrows, NothingBelowTheCompilerIncludesIt) {
  const fs::path root(KPLAN_SOURCE_DIR);
  std::set<std::string> violations;
  for (const char* dir : {"runtime", "schemas", "ir"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".cuh" && ext != ".cu")) continue;
      for (const std::string& inc : includes_of(e.path()))
        if (inc.rfind("compiler/", 0) == 0) violations.insert(fs::relative(e.path(), root).string());
    }
  EXPECT_TRUE(violations.empty()) << "these files include compiler/ headers:" << set_text(violations);
}

TEST(Arrows, ThePublicFolderIsSelfContainedC) {
  const fs::path dir = fs::path(KPLAN_SOURCE_DIR) / "runtime" / "include" / "kplan";
  const std::set<std::string> allowed = {"stddef.h", "stdint.h", "stdbool.h"};
  int headers = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++headers;
    EXPECT_EQ(e.path().extension(), ".h") << e.path();
    for (const std::string& inc : includes_of(e.path()))
      EXPECT_TRUE(allowed.count(inc) || inc.rfind("kplan/", 0) == 0) << e.path().filename() << " includes " << inc;
    EXPECT_EQ(slurp(e.path()).find("namespace"), std::string::npos) << e.path() << " is C++";
  }
  EXPECT_GE(headers, 1);
}

// The runtime's source file behind an archive member "runtime/libkplan_cpu.a(cpu_backend.cc.o)".
std::string member_source(const std::string& member) {
  static const std::regex re(R"(libkplan_([a-z_]+)\.a\(([^)]+)\.o\))");
  static const std::map<std::string, std::string> dirs = {{"runtime", "runtime"},      {"cpu", "runtime/cpu"},
                                                          {"gpu", "runtime/gpu"},      {"ddtree", "runtime/ddtree"},
                                                          {"tokenizer", "runtime/tokenizer"}};
  std::smatch m;
  if (!std::regex_search(member, m, re) || !dirs.count(m[1])) return member;
  return dirs.at(m[1]) + "/" + std::string(m[2]);
}

bool is_compiler_member(const std::string& member) {
  return member.rfind("compiler/libkplan_", 0) == 0 || member.find("/compiler/libkplan_") != std::string::npos;
}

TEST(Arrows, TheRuntimeLinksNoCompilerAndNoNvrtc) {
  const std::string map = slurp(std::string(KPLAN_LINK_PROBE) + ".map");
  ASSERT_FALSE(map.empty()) << "no link map beside " << KPLAN_LINK_PROBE;
  // "Archive member included to satisfy reference by file (symbol)": a member at column 0, then
  // the member or object that needed it, indented.
  std::map<std::string, std::string> needed_by;
  {
    std::istringstream in(map.substr(0, map.find("\nDiscarded input sections")));
    std::string line, member;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (line[0] != ' ') {
        member = line.substr(0, line.find(' '));
        continue;
      }
      if (member.empty() || needed_by.count(member)) continue;
      const size_t start = line.find_first_not_of(' ');
      needed_by[member] = line.substr(start, line.find(' ', start) - start);
    }
  }
  std::set<std::string> roots;
  int compiler_members = 0;
  for (const auto& [member, by] : needed_by) {
    if (!is_compiler_member(member)) continue;
    ++compiler_members;
    std::string at = by;
    for (int hops = 0; is_compiler_member(at) && hops < 100 && needed_by.count(at); ++hops) at = needed_by[at];
    roots.insert(member_source(at));
  }
  EXPECT_EQ(compiler_members, 0) << "these pull compiler objects into the runtime:" << set_text(roots);

  // NVRTC: no symbol of it in the probe, and no libnvrtc on its link line.
  const std::string cmd = "nm -C " + std::string(KPLAN_LINK_PROBE) + " 2>/dev/null | grep -c nvrtc";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  int nvrtc_symbols = 0;
  if (std::fscanf(p, "%d", &nvrtc_symbols) != 1) nvrtc_symbols = 0;
  ::pclose(p);
  const bool loads_nvrtc = map.find("libnvrtc") != std::string::npos;
  std::printf("[ figures  ] nvrtc symbols in the probe: %d, libnvrtc on its link line: %s\n", nvrtc_symbols,
              loads_nvrtc ? "yes" : "no");
  EXPECT_EQ(nvrtc_symbols, 0);
  EXPECT_FALSE(loads_nvrtc);
}

// A binary linked with NVRTC needs no GPU driver to start: with a linker that keeps every library
// it is given (--no-as-needed, as clang's default), CMake's CUDA::nvrtc would bring libcuda.so.1.
TEST(Arrows, NvrtcBringsNoDriverDependency) {
  const std::string cmd = "readelf -d " + std::string(KPLAN_NVRTC_PROBE) + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string needed;
  char line[512];
  while (std::fgets(line, sizeof line, p))
    if (std::string(line).find("(NEEDED)") != std::string::npos) needed += line;
  ::pclose(p);
  ASSERT_NE(needed.find("libnvrtc"), std::string::npos) << "the probe does not link NVRTC:\n" << needed;
  EXPECT_EQ(needed.find("libcuda"), std::string::npos) << "the probe needs the driver at start-up:\n" << needed;
  // And it starts, with a driver installed or not.
  EXPECT_EQ(std::system((std::string(KPLAN_NVRTC_PROBE) + " > /dev/null").c_str()), 0);
}

}  // namespace
}  // namespace kplan
