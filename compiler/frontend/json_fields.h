#pragma once
// Typed, strict reads of JSON object fields for config parsing. Every failure throws
// kplan::Error naming the file and the field's dotted path, e.g.
//   "model/config.json: field 'text_config.hidden_size': expected an integer, got string".
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kplan {

class JsonFields {
 public:
  // `obj` must outlive the reader. `path` is the object's dotted path ("" at the top level).
  JsonFields(const nlohmann::json& obj, std::string source, std::string path = "");

  // Present and not null.
  bool has(const std::string& key) const;
  // Present (null counts as present).
  bool contains(const std::string& key) const;

  int64_t req_int(const std::string& key) const;
  int64_t opt_int(const std::string& key, int64_t fallback) const;
  // Absent or null gives nullopt.
  std::optional<int64_t> nullable_int(const std::string& key) const;
  double req_number(const std::string& key) const;
  double opt_number(const std::string& key, double fallback) const;
  bool req_bool(const std::string& key) const;
  bool opt_bool(const std::string& key, bool fallback) const;
  std::string req_string(const std::string& key) const;
  std::string opt_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> req_int_list(const std::string& key) const;
  std::vector<std::string> opt_string_list(const std::string& key) const;
  // A nested object field; throws when absent or not an object.
  JsonFields req_object(const std::string& key) const;
  // Absent or null gives nullopt; a non-object value throws.
  std::optional<JsonFields> opt_object(const std::string& key) const;

  const nlohmann::json& json() const { return *obj_; }
  const std::string& source() const { return source_; }
  // Dotted path of a field of this object ("text_config.hidden_size").
  std::string field_path(const std::string& key) const;
  // Throws kplan::Error: "<source>: field '<path>': <message>".
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const nlohmann::json& at(const std::string& key) const;  // throws "missing required field"
  int64_t as_int(const std::string& key, const nlohmann::json& v) const;
  double as_number(const std::string& key, const nlohmann::json& v) const;

  const nlohmann::json* obj_;
  std::string source_;
  std::string path_;
};

// Parses JSON text; malformed JSON throws kplan::Error naming `source` and the parser's reason.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// JSON from an untrusted file (config.json, a shard index, a safetensors header), bounded: nesting
// deeper than kMaxJsonDepth is refused before parsing (a deeply nested value overflows the stack
// where it is later printed or walked), and every parse problem — syntax, a number like 1e400
// that overflows a double — comes back as one JsonTextError with nlohmann's reason.
inline constexpr int kMaxJsonDepth = 64;
struct JsonTextError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
nlohmann::json parse_json_bounded(std::string_view text);
// Reads and parses a JSON file; a missing/unreadable file or bad JSON names the file.
nlohmann::json read_json_file(const std::string& path);

}  // namespace kplan
