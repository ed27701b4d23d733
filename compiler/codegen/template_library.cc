#include "compiler/codegen/template_library.h"

#include <fstream>
#include <set>
#include <sstream>

#include "ir/support/error.h"

namespace kplan::codegen {

// Defined in the build-generated kernel_templates_embedded.cc (compiler/codegen/embed_templates.cmake).
extern const char* const kEmbeddedTemplateNames[];
extern const char* const kEmbeddedTemplateTexts[];
extern const int kEmbeddedTemplateCount;

namespace {

// Names in `#include "name"` lines (system includes <...> are not used by the templates).
std::vector<std::string> quoted_includes(const std::string& text) {
  std::vector<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line.compare(p, 8, "#include") != 0) continue;
    const size_t open = line.find('"', p + 8);
    if (open == std::string::npos) continue;
    const size_t close = line.find('"', open + 1);
    if (close == std::string::npos) continue;
    names.push_back(line.substr(open + 1, close - open - 1));
  }
  return names;
}

}  // namespace

TemplateLibrary::TemplateLibrary(std::map<std::string, std::string> headers)
    : headers_(std::move(headers)) {}

const TemplateLibrary& TemplateLibrary::embedded() {
  static const TemplateLibrary library = [] {
    std::map<std::string, std::string> headers;
    for (int i = 0; i < kEmbeddedTemplateCount; ++i) {
      headers.emplace(kEmbeddedTemplateNames[i], kEmbeddedTemplateTexts[i]);
    }
    return TemplateLibrary(std::move(headers));
  }();
  return library;
}

TemplateLibrary TemplateLibrary::from_directory(const std::filesystem::path& dir) {
  std::map<std::string, std::string> headers;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".cuh") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw Error("codegen: cannot read kernel template " + entry.path().string());
    headers.emplace(entry.path().filename().string(), text.str());
  }
  if (ec) throw Error("codegen: cannot list kernel templates in " + dir.string() + ": " + ec.message());
  if (headers.empty()) throw Error("codegen: no kernel templates (*.cuh) in " + dir.string());
  return TemplateLibrary(std::move(headers));
}

const std::string& TemplateLibrary::header(const std::string& name) const {
  auto it = headers_.find(name);
  if (it == headers_.end()) throw Error("codegen: no kernel template header '" + name + "'");
  return it->second;
}

std::vector<HeaderFile> TemplateLibrary::includes_of(const std::string& source) const {
  std::set<std::string> seen;
  std::vector<std::string> pending = quoted_includes(source);
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (!seen.insert(name).second) continue;
    for (std::string& inner : quoted_includes(header(name))) pending.push_back(std::move(inner));
  }
  std::vector<HeaderFile> out;
  for (const std::string& name : seen) out.emplace_back(name, header(name));
  return out;
}

}  // namespace kplan::codegen
