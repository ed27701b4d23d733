#include "compiler/frontend/json_fields.h"

#include <cmath>
#include <filesystem>

#include "ir/support/error.h"
#include "ir/support/regular_file.h"

namespace kplan {

namespace {
std::string type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}
}  // namespace

JsonFields::JsonFields(const nlohmann::json& obj, std::string source, std::string path)
    : obj_(&obj), source_(std::move(source)), path_(std::move(path)) {
  if (!obj.is_object()) {
    std::string where = path_.empty() ? std::string("top level") : "field '" + path_ + "'";
    throw Error(source_ + ": " + where + ": expected an object, got " + type_name(obj));
  }
}

std::string JsonFields::field_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonFields::fail(const std::string& key, const std::string& message) const {
  throw Error(source_ + ": field '" + field_path(key) + "': " + message);
}

bool JsonFields::has(const std::string& key) const {
  auto it = obj_->find(key);
  return it != obj_->end() && !it->is_null();
}

bool JsonFields::contains(const std::string& key) const { return obj_->contains(key); }

const nlohmann::json& JsonFields::at(const std::string& key) const {
  auto it = obj_->find(key);
  if (it == obj_->end() || it->is_null()) fail(key, "missing required field");
  return *it;
}

int64_t JsonFields::as_int(const std::string& key, const nlohmann::json& v) const {
  if (v.is_number_integer()) return v.get<int64_t>();
  // Some writers emit integral values as floats (4096.0); accept those, nothing else.
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      return static_cast<int64_t>(d);
    fail(key, "expected an integer, got " + v.dump());
  }
  fail(key, "expected an integer, got " + type_name(v));
}

double JsonFields::as_number(const std::string& key, const nlohmann::json& v) const {
  if (v.is_number()) return v.get<double>();
  fail(key, "expected a number, got " + type_name(v));
}

int64_t JsonFields::req_int(const std::string& key) const { return as_int(key, at(key)); }

int64_t JsonFields::opt_int(const std::string& key, int64_t fallback) const {
  return has(key) ? as_int(key, obj_->at(key)) : fallback;
}

std::optional<int64_t> JsonFields::nullable_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return as_int(key, obj_->at(key));
}

double JsonFields::req_number(const std::string& key) const { return as_number(key, at(key)); }

double JsonFields::opt_number(const std::string& key, double fallback) const {
  return has(key) ? as_number(key, obj_->at(key)) : fallback;
}

bool JsonFields::req_bool(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + type_name(v));
  return v.get<bool>();
}

bool JsonFields::opt_bool(const std::string& key, bool fallback) const {
  return has(key) ? req_bool(key) : fallback;
}

std::string JsonFields::req_string(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_string()) fail(key, "expected a string, got " + type_name(v));
  return v.get<std::string>();
}

std::string JsonFields::opt_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? req_string(key) : fallback;
}

std::vector<int64_t> JsonFields::req_int_list(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array()) fail(key, "expected a list of integers, got " + type_name(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer())
      fail(key, "element " + std::to_string(i) + ": expected an integer, got " + type_name(v[i]));
    out.push_back(v[i].get<int64_t>());
  }
  return out;
}

std::vector<std::string> JsonFields::opt_string_list(const std::string& key) const {
  if (!has(key)) return {};
  const auto& v = obj_->at(key);
  if (!v.is_array()) fail(key, "expected a list of strings, got " + type_name(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      fail(key, "element " + std::to_string(i) + ": expected a string, got " + type_name(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

JsonFields JsonFields::req_object(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_object()) fail(key, "expected an object, got " + type_name(v));
  return JsonFields(v, source_, field_path(key));
}

std::optional<JsonFields> JsonFields::opt_object(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return req_object(key);
}

nlohmann::json parse_json_bounded(std::string_view text) {
  // Bracket depth outside strings, in one pass: the parser never builds a tree deeper than this.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw JsonTextError("values nest deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message already says where ("at line 3, column 5") and why; drop its "[json...]" tag.
    std::string what = e.what();
    auto pos = what.find("] ");
    throw JsonTextError(pos == std::string::npos ? what : what.substr(pos + 2));
  }
}

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  try {
    return parse_json_bounded(text);
  } catch (const JsonTextError& e) {
    throw Error(source + ": bad JSON: " + e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_text(read_regular_file(path, "JSON file"), path);
}

}  // namespace kplan
