#include "ir/parser.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "ir/support/error.h"

namespace kplan::ir {

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string source) : s_(text), source_(std::move(source)) {}

  std::unique_ptr<Module> module() {
    auto m = std::make_unique<Module>();
    keyword("module");
    skip();
    if (peek() == '{' && attrs_follow()) m->attrs() = attrs();
    expect('{');
    while (true) {
      skip();
      if (peek() == '}' || pos_ >= s_.size()) break;
      function(*m);
    }
    expect('}');
    skip();
    if (pos_ < s_.size()) error("unexpected text after the module");
    return m;
  }

 private:
  std::string_view s_;
  std::string source_;
  size_t pos_ = 0;
  std::unordered_map<std::string, Value*> values_;  // current function's names

  [[noreturn]] void error(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(source_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }

  // Skips whitespace and // comments.
  void skip() {
    while (pos_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
        ++pos_;
      } else if (s_.substr(pos_, 2) == "//") {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool accept(char c) {
    skip();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) error(std::string("expected '") + c + "'" + found());
  }
  std::string found() const {
    if (pos_ >= s_.size()) return ", found end of input";
    size_t end = pos_;
    while (end < s_.size() && end - pos_ < 16 && !std::isspace(static_cast<unsigned char>(s_[end])))
      ++end;
    return ", found '" + std::string(s_.substr(pos_, end - pos_)) + "'";
  }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }
  std::string ident() {
    skip();
    size_t start = pos_;
    if (!(std::isalpha(static_cast<unsigned char>(peek())) || peek() == '_'))
      error("expected a name" + found());
    while (pos_ < s_.size() && ident_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  void keyword(const char* kw) {
    size_t at = pos_;
    skip();
    at = pos_;
    if (ident() != kw) {
      pos_ = at;
      error(std::string("expected '") + kw + "'" + found());
    }
  }
  // "%name" without the '%'.
  std::string value_name() {
    skip();
    if (peek() != '%') error("expected a value (%name)" + found());
    ++pos_;
    size_t start = pos_;
    while (pos_ < s_.size() && ident_char(s_[pos_])) ++pos_;
    if (start == pos_) error("expected a value name after '%'");
    return std::string(s_.substr(start, pos_ - start));
  }

  bool attrs_follow() {
    size_t save = pos_;
    ++pos_;  // '{'
    skip();
    bool yes = false;
    if (std::isalpha(static_cast<unsigned char>(peek())) || peek() == '_') {
      ident();
      skip();
      yes = peek() == '=';
    }
    pos_ = save;
    return yes;
  }

  Type type() {
    skip();
    size_t at = pos_;
    std::string dt = ident();
    auto d = dtype_from_name(dt);
    if (!d) {
      pos_ = at;
      error("unknown dtype '" + dt + "'");
    }
    Type t{*d, {}};
    expect('[');
    skip();
    if (accept(']')) return t;
    while (true) {
      skip();
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ']' && s_[pos_] != '\n') ++pos_;
      std::string_view text = s_.substr(start, pos_ - start);
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
        text.remove_suffix(1);
      auto dim = Dim::parse(text);
      if (!dim) {
        pos_ = start;
        error("bad dim '" + std::string(text) + "'");
      }
      t.shape.push_back(*dim);
      if (accept(']')) break;
      expect(',');
    }
    if (!constant_element_count(t.shape)) {
      pos_ = at;
      error("type " + t.str() + " has more than 2^63 elements");
    }
    return t;
  }

  Attr attr_value() {
    skip();
    char c = peek();
    if (c == '"') {
      size_t open = pos_++;
      std::string out;
      while (true) {
        if (pos_ >= s_.size() || s_[pos_] == '\n') {
          pos_ = open;
          error("unterminated string");
        }
        char ch = s_[pos_++];
        if (ch == '"') break;
        if (ch == '\\') {
          if (pos_ >= s_.size()) error("unterminated string");
          ch = s_[pos_++];
        }
        out += ch;
      }
      return out;
    }
    if (c == '[') {
      ++pos_;
      std::vector<int64_t> list;
      if (accept(']')) return list;
      while (true) {
        // Elements are integers: a nested list or string is refused here, before any recursion,
        // so "[[[[..." in untrusted text cannot overflow the stack.
        skip();
        if (peek() == '[' || peek() == '"') error("list attributes hold integers only");
        Attr v = attr_value();
        auto* i = std::get_if<int64_t>(&v);
        if (!i) error("list attributes hold integers only");
        list.push_back(*i);
        if (accept(']')) break;
        expect(',');
      }
      return list;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '.' || s_[pos_] == '-' || s_[pos_] == '+'))
      ++pos_;
    std::string word(s_.substr(start, pos_ - start));
    if (word == "true") return true;
    if (word == "false") return false;
    if (word == "inf") return INFINITY;
    if (word == "-inf") return -INFINITY;
    if (word == "nan") return NAN;
    if (word.empty()) error("expected an attribute value" + found());
    bool is_float = word.find_first_of(".eE") != std::string::npos;
    const char* b = word.data();
    const char* e = word.data() + word.size();
    if (is_float) {
      double v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) {
        pos_ = start;
        error("bad number '" + word + "'");
      }
      return v;
    }
    int64_t v = 0;
    auto [p, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || p != e) {
      pos_ = start;
      error("bad attribute value '" + word + "'");
    }
    return v;
  }

  Attrs attrs() {
    Attrs a;
    expect('{');
    if (accept('}')) return a;
    while (true) {
      size_t at = pos_;
      std::string key = ident();
      if (a.has(key)) {
        pos_ = at;
        skip();
        error("duplicate attribute '" + key + "'");
      }
      expect('=');
      a.set(key, attr_value());
      if (accept('}')) break;
      expect(',');
    }
    return a;
  }

  void define(const std::string& name, Value* v) {
    if (!values_.emplace(name, v).second) error("value %" + name + " is defined twice");
  }

  void function(Module& m) {
    keyword("func");
    expect('@');
    std::string name = ident();
    if (m.function(name)) error("function @" + name + " is defined twice");
    Function& fn = *m.add_function(name);
    values_.clear();
    expect('(');
    if (!accept(')')) {
      while (true) {
        std::string arg = value_name();
        expect(':');
        Type t = type();
        if (fn.arg(arg)) error("argument %" + arg + " is defined twice");
        define(arg, fn.add_arg(arg, t));
        if (accept(')')) break;
        expect(',');
      }
    }
    expect('{');
    while (true) {
      skip();
      if (peek() == '}') break;
      op(fn);
    }
    expect('}');
  }

  void op(Function& fn) {
    std::vector<std::string> results;
    std::vector<size_t> result_pos;
    skip();
    const size_t op_start = pos_;
    if (peek() == '%') {
      while (true) {
        skip();
        result_pos.push_back(pos_);
        results.push_back(value_name());
        if (!accept(',')) break;
      }
      expect('=');
    }
    skip();
    size_t at = pos_;
    std::string name = ident();
    auto kind = op_kind_from_name(name);
    if (!kind) {
      pos_ = at;
      error("unknown op '" + name + "'");
    }
    std::vector<Value*> operands;
    skip();
    if (peek() == '(') {
      ++pos_;
      if (!accept(')')) {
        while (true) {
          skip();
          size_t vat = pos_;
          std::string v = value_name();
          auto it = values_.find(v);
          if (it == values_.end()) {
            pos_ = vat;
            error("use of undefined value %" + v);
          }
          operands.push_back(it->second);
          if (accept(')')) break;
          expect(',');
        }
      }
    }
    skip();
    Attrs a;
    if (peek() == '{') a = attrs();
    std::vector<Type> types;
    if (!results.empty()) {
      expect(':');
      while (true) {
        types.push_back(type());
        if (!accept(',')) break;
      }
      if (types.size() != results.size()) {
        pos_ = op_start;
        error(std::to_string(results.size()) + " results named but " +
              std::to_string(types.size()) + " types given");
      }
    }
    const size_t end = pos_;
    Op* o = fn.append(std::make_unique<Op>(*kind, std::move(operands), std::move(types),
                                           std::move(a)));
    for (size_t i = 0; i < results.size(); ++i) {
      pos_ = result_pos[i];  // errors point at the name
      define(results[i], o->result(i));
    }
    pos_ = end;
  }
};

}  // namespace

std::unique_ptr<Module> parse_module(std::string_view text, const std::string& source) {
  return Parser(text, source).module();
}

}  // namespace kplan::ir
