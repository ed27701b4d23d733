#pragma once
// The kernel template headers NVRTC compiles against. They are passed to NVRTC as in-memory
// headers (never found through an include path), so the exact text compiled is known and the
// kernel cache key can cover it. By default the headers of kernels_templates/ are embedded in
// the kplan_codegen library at build time, so `kplan compile` needs no source tree.
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kplan::codegen {

using HeaderFile = std::pair<std::string, std::string>;  // (include name, content)

class TemplateLibrary {
 public:
  explicit TemplateLibrary(std::map<std::string, std::string> headers);

  // kernels_templates/*.cuh as they were when kplan was built.
  static const TemplateLibrary& embedded();
  // Every *.cuh of a directory (tests, template development).
  static TemplateLibrary from_directory(const std::filesystem::path& dir);

  const std::map<std::string, std::string>& headers() const { return headers_; }
  // Throws kplan::Error when there is no header of that name.
  const std::string& header(const std::string& name) const;
  // The headers `source` includes with #include "name", transitively, sorted by name. Throws
  // kplan::Error naming a missing header.
  std::vector<HeaderFile> includes_of(const std::string& source) const;

 private:
  std::map<std::string, std::string> headers_;
};

}  // namespace kplan::codegen
