#include "runtime/tokenizer/chat_template.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "ir/support/error.h"

namespace kplan::tokenizer {

using Json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Values: the data (JSON), plus what templates make that JSON cannot hold.
namespace {

struct Node;

struct Value {
  enum class Kind { Undefined, Data, Namespace, Macro, Builtin };
  Kind kind = Kind::Undefined;
  Json data;
  std::shared_ptr<Json> ns;  // Namespace: an object, shared so `set ns.x` is seen by every holder
  const Node* macro = nullptr;  // Macro: its definition
  std::string builtin;       // Builtin: range, namespace, raise_exception
  std::string what;          // Undefined: what was looked up, for errors

  static Value of(Json j) {
    Value v;
    v.kind = Kind::Data;
    v.data = std::move(j);
    return v;
  }
  static Value undefined(std::string what) {
    Value v;
    v.what = std::move(what);
    return v;
  }
  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_data() const { return kind == Kind::Data; }
};

// ---------------------------------------------------------------------------------------------
// Lexing: the source to pieces (text, {{ expression }}, {% statement %}), whitespace control
// applied as transformers' environment does it (trim_blocks, lstrip_blocks).

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End };
  Kind kind = Kind::End;
  std::string text;  // name, op, string value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0;
};

struct Piece {
  enum class Kind { Text, Expr, Stmt };
  Kind kind;
  std::string text;           // Text
  std::vector<Token> tokens;  // Expr, Stmt (ending in an End token)
  int line;
};

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& name) : src_(src), name_(name) {}

  std::vector<Piece> run() {
    std::vector<Piece> pieces;
    enum class Strip { None, Newline, All } strip_next = Strip::None;
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t open = find_open(pos);
      std::string text(src_.substr(pos, open - pos));
      const size_t text_start = pos;
      // What the tag before asked of this text.
      if (strip_next == Strip::All) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
      } else if (strip_next == Strip::Newline) {
        if (text.rfind("\r\n", 0) == 0) text.erase(0, 2);
        else if (!text.empty() && text[0] == '\n') text.erase(0, 1);
      }
      strip_next = Strip::None;
      if (open == src_.size()) {
        add_text(pieces, std::move(text), line_at(text_start));
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      size_t inner = open + 2;
      const bool minus_open = inner < src_.size() && src_[inner] == '-';
      const bool plus_open = inner < src_.size() && src_[inner] == '+';
      if (minus_open || plus_open) ++inner;
      if (minus_open) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (!plus_open && kind != '{') {
        // lstrip_blocks: a block tag or comment that only whitespace precedes on its line.
        const size_t nl = text.rfind('\n');
        const size_t from = nl == std::string::npos ? 0 : nl + 1;
        const bool line_start = nl != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
        if (line_start && text.find_first_not_of(" \t", from) == std::string::npos) text.erase(from);
      }
      add_text(pieces, std::move(text), line_at(text_start));
      const int line = line_at(open);
      bool minus_close = false;
      if (kind == '#') {
        const size_t close = src_.find("#}", inner);
        if (close == std::string::npos) fail(line, "a comment '{#' is never closed with '#}'");
        minus_close = close > inner && src_[close - 1] == '-';
        pos = close + 2;
      } else {
        Piece p{kind == '{' ? Piece::Kind::Expr : Piece::Kind::Stmt, "", {}, line};
        pos = lex_tag(inner, kind == '{' ? '}' : '%', p.tokens, minus_close);
        pieces.push_back(std::move(p));
      }
      strip_next = minus_close ? Strip::All : (kind == '{' ? Strip::None : Strip::Newline);
    }
    return pieces;
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(name_ + ":" + std::to_string(line) + ": " + what);
  }

  int line_at(size_t offset) const {
    return 1 + static_cast<int>(std::count(src_.begin(), src_.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
  }

  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  static void add_text(std::vector<Piece>& pieces, std::string text, int line) {
    if (!text.empty()) pieces.push_back(Piece{Piece::Kind::Text, std::move(text), {}, line});
  }

  // Tokens of a tag's inside from `pos` to its closer (`}}` or `%}`, maybe after a `-`); returns
  // the offset after the closer.
  size_t lex_tag(size_t pos, char closer, std::vector<Token>& out, bool& minus_close) {
    int depth = 0;  // open brackets: a `}}` inside a dict literal does not close the tag
    for (;;) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      const int line = line_at(pos);
      if (pos >= src_.size()) fail(line, std::string("a tag is never closed with '") + closer + "}'");
      const char c = src_[pos];
      auto at = [&](size_t k) { return pos + k < src_.size() ? src_[pos + k] : '\0'; };
      if (depth == 0 && c == '-' && at(1) == closer && at(2) == '}') {
        minus_close = true;
        out.push_back(Token{Token::Kind::End, "", 0, 0, line});
        return pos + 3;
      }
      if (depth == 0 && c == closer && at(1) == '}') {
        out.push_back(Token{Token::Kind::End, "", 0, 0, line});
        return pos + 2;
      }
      Token t;
      t.line = line;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        t.kind = Token::Kind::Name;
        t.text = std::string(src_.substr(pos, e - pos));
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = pos;
        while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          is_float = true;
          ++e;
          while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t k = e + 1;
          if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
          if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
            is_float = true;
            e = k;
            while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          }
        }
        std::string digits;
        for (char d : src_.substr(pos, e - pos))
          if (d != '_') digits += d;
        if (is_float) {
          t.kind = Token::Kind::Float;
          // Python's float(): an overflowing literal (1e999) is inf, an underflowing one 0.0
          // (std::stod throws out_of_range for both; strtod gives these values).
          t.float_value = std::strtod(digits.c_str(), nullptr);
        } else {
          t.kind = Token::Kind::Int;
          try {
            t.int_value = std::stoll(digits);
          } catch (const std::exception&) {
            fail(line, "integer literal " + digits + " is out of range");
          }
        }
        pos = e;
      } else if (c == '\'' || c == '"') {
        t.kind = Token::Kind::String;
        size_t e = pos + 1;
        for (;;) {
          if (e >= src_.size()) fail(line, "a string literal is never closed");
          const char d = src_[e];
          if (d == c) break;
          if (d == '\\' && e + 1 < src_.size()) {
            const char x = src_[e + 1];
            e += 2;
            switch (x) {
              case 'n': t.text += '\n'; break;
              case 't': t.text += '\t'; break;
              case 'r': t.text += '\r'; break;
              case '\\': t.text += '\\'; break;
              case '\'': t.text += '\''; break;
              case '"': t.text += '"'; break;
              case '0': t.text += '\0'; break;
              case '\n': break;
              default: t.text += '\\'; t.text += x; break;  // Python keeps unknown escapes
            }
            continue;
          }
          t.text += d;
          ++e;
        }
        pos = e + 1;
      } else {
        static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-", "*", "/",
                                           "%", "~", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", "="};
        bool found = false;
        for (const char* op : kOps) {
          const std::string_view o(op);
          if (src_.substr(pos, o.size()) == o) {
            t.kind = Token::Kind::Op;
            t.text = std::string(o);
            pos += o.size();
            found = true;
            break;
          }
        }
        if (!found) fail(line, std::string("unexpected character '") + c + "' in a tag");
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        if (t.text == ")" || t.text == "]" || t.text == "}") depth = std::max(0, depth - 1);
      }
      out.push_back(std::move(t));
    }
  }

  std::string_view src_;
  const std::string& name_;
};

// ---------------------------------------------------------------------------------------------
// The syntax tree.

struct Expr {
  enum class Kind { Literal, Name, Attr, Item, Slice, Call, Filter, Test, Not, Neg, Binary, And, Or, Cond, List, Dict };
  Kind kind;
  int line = 0;
  std::string name;  // Name, Attr, Call's method name, Filter, Test, Binary's operator
  Json literal;
  bool negated = false;  // Test: `is not`; Binary "in": `not in`
  std::vector<std::unique_ptr<Expr>> args;  // operands / positional arguments (Dict: key, value, ...)
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue };
  Kind kind;
  int line = 0;
  std::string text;                                  // Text
  ExprPtr expr;                                      // Output, For's iterable, Set's value
  std::vector<std::pair<ExprPtr, Body>> branches;    // If: (condition, body) ...
  Body body, else_body;                              // For, If's else, SetBlock, Macro
  std::vector<std::string> targets;                  // For's loop names; Set: name [, attribute]
  ExprPtr filter;                                    // For's `if`
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: name, default (or null)
};

}  // namespace

struct ChatTemplateProgram {
  Body body;
};

namespace {

// ---------------------------------------------------------------------------------------------
// Parsing.

const std::set<std::string> kFilters = {"trim",  "tojson", "length", "count",   "default", "d",    "string",
                                        "first", "last",   "join",   "upper",   "lower",   "list", "reverse",
                                        "int",   "float",  "items",  "safe",    "capitalize", "replace", "abs", "dictsort"};
const std::set<std::string> kTests = {"defined", "undefined", "none",     "string", "number", "integer",
                                      "float",   "boolean",   "mapping",  "iterable", "sequence", "true",
                                      "false",   "odd",       "even"};
const std::set<std::string> kMethods = {"get",      "items",    "keys",  "values", "strip",   "lstrip", "rstrip",
                                        "split",    "startswith", "endswith", "upper", "lower", "replace", "find"};
const std::set<std::string> kGlobals = {"range", "namespace", "raise_exception"};

// Nesting limits: a template is data from a checkpoint, and deep nesting or endless macro
// recursion must be an error, not a stack overflow.
constexpr int kMaxNesting = 128;     // nested statements while parsing
constexpr int kMaxExprDepth = 512;   // parse_expr / parse_unary levels (two or so per bracket)
constexpr int kMaxMacroDepth = 64;   // macro calls inside macro calls
constexpr int64_t kMaxSteps = 1'000'000;               // statements and loop turns while rendering
constexpr size_t kMaxOutputBytes = size_t{64} << 20;  // text rendered, in any one string

struct DepthGuard {
  DepthGuard(int& depth, int limit, const std::function<void()>& on_overflow) : depth_(depth) {
    if (++depth_ > limit) {
      --depth_;
      on_overflow();
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};

class Parser {
 public:
  Parser(std::vector<Piece> pieces, const std::string& name) : pieces_(std::move(pieces)), name_(name) {}

  Body parse_all() {
    std::string end;
    Body b = parse_body({}, end);
    return b;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(name_ + ":" + std::to_string(line) + ": " + what);
  }

  // Statements up to one whose keyword is in `ends` (returned in `end`, the tag left current).
  Body parse_body(const std::set<std::string>& ends, std::string& end) {
    Body body;
    while (at_ < pieces_.size()) {
      Piece& p = pieces_[at_];
      if (p.kind == Piece::Kind::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->line = p.line;
        n->text = p.text;
        body.push_back(std::move(n));
        ++at_;
        continue;
      }
      toks_ = &p.tokens;
      tk_ = 0;
      if (p.kind == Piece::Kind::Expr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->line = p.line;
        n->expr = parse_expr();
        expect_end();
        body.push_back(std::move(n));
        ++at_;
        continue;
      }
      const Token& kw = peek();
      if (kw.kind != Token::Kind::Name) fail(p.line, "a statement tag must start with a keyword");
      if (ends.count(kw.text)) {
        end = kw.text;
        return body;
      }
      body.push_back(parse_statement(p.line));
    }
    if (!ends.empty()) {
      std::string names;
      for (const std::string& e : ends) names += (names.empty() ? "" : " or ") + std::string("'") + e + "'";
      fail(pieces_.empty() ? 1 : pieces_.back().line, "the template ends before " + names);
    }
    return body;
  }

  std::unique_ptr<Node> parse_statement(int line) {
    DepthGuard guard(depth_, kMaxNesting, [&] { fail(line, "statements nested more than 128 deep"); });
    const std::string kw = next().text;
    auto n = std::make_unique<Node>();
    n->line = line;
    std::string end;
    if (kw == "if") {
      n->kind = Node::Kind::If;
      ExprPtr cond = parse_expr();
      expect_end();
      ++at_;
      for (;;) {
        Body b = parse_body({"elif", "else", "endif"}, end);
        n->branches.emplace_back(std::move(cond), std::move(b));
        next();  // the keyword
        if (end == "elif") {
          cond = parse_expr();
          expect_end();
          ++at_;
          continue;
        }
        if (end == "else") {
          expect_end();
          ++at_;
          n->else_body = parse_body({"endif"}, end);
          next();
        }
        expect_end();
        ++at_;
        break;
      }
      return n;
    }
    if (kw == "for") {
      n->kind = Node::Kind::For;
      for (;;) {
        n->targets.push_back(expect_name("a loop variable"));
        if (!accept_op(",")) break;
      }
      if (!accept_name("in")) fail(line, "expected 'in' in a for statement");
      n->expr = parse_or_expr_no_cond();
      if (accept_name("if")) n->filter = parse_or_expr_no_cond();
      if (peek().kind == Token::Kind::Name && peek().text == "recursive")
        fail(line, "unsupported construct 'recursive' loops");
      expect_end();
      ++at_;
      n->body = parse_body({"else", "endfor"}, end);
      next();
      if (end == "else") {
        expect_end();
        ++at_;
        n->else_body = parse_body({"endfor"}, end);
        next();
      }
      expect_end();
      ++at_;
      return n;
    }
    if (kw == "set") {
      n->targets.push_back(expect_name("a variable name"));
      if (accept_op(".")) n->targets.push_back(expect_name("an attribute name"));
      if (peek().kind == Token::Kind::Op && peek().text == ",")
        fail(line, "unsupported construct 'set' of several names (set them one by one)");
      if (accept_op("=")) {
        n->kind = Node::Kind::Set;
        n->expr = parse_expr();
        expect_end();
        ++at_;
        return n;
      }
      if (n->targets.size() != 1) fail(line, "a block set takes one name");
      if (peek().kind == Token::Kind::Op && peek().text == "|") fail(line, "unsupported construct 'set' block with a filter");
      n->kind = Node::Kind::SetBlock;
      expect_end();
      ++at_;
      n->body = parse_body({"endset"}, end);
      next();
      expect_end();
      ++at_;
      return n;
    }
    if (kw == "macro") {
      n->kind = Node::Kind::Macro;
      n->targets.push_back(expect_name("a macro name"));
      if (!accept_op("(")) fail(line, "expected '(' after the macro's name");
      if (!accept_op(")")) {
        for (;;) {
          std::string param = expect_name("a parameter name");
          ExprPtr def;
          if (accept_op("=")) def = parse_expr();
          n->params.emplace_back(std::move(param), std::move(def));
          if (accept_op(")")) break;
          if (!accept_op(",")) fail(line, "expected ',' or ')' in the macro's parameters");
        }
      }
      expect_end();
      ++at_;
      n->body = parse_body({"endmacro"}, end);
      next();
      if (peek().kind == Token::Kind::Name) next();  // {% endmacro name %}
      expect_end();
      ++at_;
      return n;
    }
    if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Kind::Break : Node::Kind::Continue;
      expect_end();
      ++at_;
      return n;
    }
    if (kw == "elif" || kw == "else" || kw.rfind("end", 0) == 0) fail(line, "'" + kw + "' without its opening statement");
    fail(line, "unsupported construct '" + kw + "' (kplan renders a subset of Jinja: if, for, set, macro, "
               "break, continue)");
  }

  // ---- tokens of the current tag
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(tk_ + ahead, toks_->size() - 1);
    return (*toks_)[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (tk_ < toks_->size() - 1) ++tk_;
    return t;
  }
  bool accept_op(const char* op) {
    if (peek().kind == Token::Kind::Op && peek().text == op) {
      next();
      return true;
    }
    return false;
  }
  bool accept_name(const char* name) {
    if (peek().kind == Token::Kind::Name && peek().text == name) {
      next();
      return true;
    }
    return false;
  }
  std::string expect_name(const char* what) {
    if (peek().kind != Token::Kind::Name) fail(peek().line, std::string("expected ") + what + ", found " + describe(peek()));
    return next().text;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(peek().line, std::string("expected '") + op + "', found " + describe(peek()));
  }
  void expect_end() {
    if (peek().kind != Token::Kind::End) fail(peek().line, "unexpected " + describe(peek()) + " in a tag");
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::Kind::End: return "the end of the tag";
      case Token::Kind::String: return "a string";
      case Token::Kind::Int:
      case Token::Kind::Float: return "a number";
      default: return "'" + t.text + "'";
    }
  }

  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- expressions, Jinja's precedence
  ExprPtr parse_expr() {
    DepthGuard guard(expr_depth_, kMaxExprDepth, [&] { fail(peek().line, "an expression nested too deep"); });
    ExprPtr e = parse_or_expr_no_cond();
    if (peek().kind == Token::Kind::Name && peek().text == "if") {
      const int line = next().line;
      auto c = make(Expr::Kind::Cond, line);
      ExprPtr cond = parse_or_expr_no_cond();
      ExprPtr otherwise;
      if (accept_name("else")) otherwise = parse_expr();
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      if (otherwise) c->args.push_back(std::move(otherwise));
      return c;
    }
    return e;
  }
  ExprPtr parse_or_expr_no_cond() {
    ExprPtr e = parse_and();
    while (peek().kind == Token::Kind::Name && peek().text == "or") {
      auto o = make(Expr::Kind::Or, next().line);
      o->args.push_back(std::move(e));
      o->args.push_back(parse_and());
      e = std::move(o);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (peek().kind == Token::Kind::Name && peek().text == "and") {
      auto a = make(Expr::Kind::And, next().line);
      a->args.push_back(std::move(e));
      a->args.push_back(parse_not());
      e = std::move(a);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (peek().kind == Token::Kind::Name && peek().text == "not") {
      auto n = make(Expr::Kind::Not, next().line);
      n->args.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    for (;;) {
      const Token& t = peek();
      std::string op;
      bool negated = false;
      if (t.kind == Token::Kind::Op &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
        op = t.text;
      } else if (t.kind == Token::Kind::Name && t.text == "in") {
        op = "in";
      } else if (t.kind == Token::Kind::Name && t.text == "not" && peek(1).kind == Token::Kind::Name &&
                 peek(1).text == "in") {
        next();
        op = "in";
        negated = true;
      } else {
        return e;
      }
      auto b = make(Expr::Kind::Binary, next().line);
      b->name = op;
      b->negated = negated;
      b->args.push_back(std::move(e));
      b->args.push_back(parse_math1());
      e = std::move(b);
    }
  }
  ExprPtr binary(ExprPtr lhs, const std::string& op, int line, ExprPtr rhs) {
    auto b = make(Expr::Kind::Binary, line);
    b->name = op;
    b->args.push_back(std::move(lhs));
    b->args.push_back(std::move(rhs));
    return b;
  }
  ExprPtr parse_math1() {  // + -
    ExprPtr e = parse_concat();
    while (peek().kind == Token::Kind::Op && (peek().text == "+" || peek().text == "-")) {
      const Token& t = next();
      const std::string op = t.text;
      e = binary(std::move(e), op, t.line, parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {  // ~
    ExprPtr e = parse_math2();
    while (peek().kind == Token::Kind::Op && peek().text == "~") {
      const int line = next().line;
      e = binary(std::move(e), "~", line, parse_math2());
    }
    return e;
  }
  ExprPtr parse_math2() {  // * / // %
    ExprPtr e = parse_pow();
    while (peek().kind == Token::Kind::Op &&
           (peek().text == "*" || peek().text == "/" || peek().text == "//" || peek().text == "%")) {
      const Token& t = next();
      const std::string op = t.text;
      e = binary(std::move(e), op, t.line, parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    if (peek().kind == Token::Kind::Op && peek().text == "**") fail(peek().line, "unsupported construct '**'");
    return e;
  }
  ExprPtr parse_unary() {
    DepthGuard guard(expr_depth_, kMaxExprDepth, [&] { fail(peek().line, "an expression nested too deep"); });
    if (peek().kind == Token::Kind::Op && peek().text == "-") {
      auto n = make(Expr::Kind::Neg, next().line);
      n->args.push_back(parse_unary());
      return n;
    }
    if (peek().kind == Token::Kind::Op && peek().text == "+") {
      next();
      return parse_unary();
    }
    ExprPtr e = parse_postfix(parse_primary());
    return parse_filters_and_tests(std::move(e));
  }
  ExprPtr parse_primary() {
    const Token& t = peek();
    const int line = t.line;
    switch (t.kind) {
      case Token::Kind::String: {
        std::string s;
        while (peek().kind == Token::Kind::String) s += next().text;  // adjacent literals join
        auto e = make(Expr::Kind::Literal, line);
        e->literal = s;
        return e;
      }
      case Token::Kind::Int: {
        auto e = make(Expr::Kind::Literal, line);
        e->literal = next().int_value;
        return e;
      }
      case Token::Kind::Float: {
        auto e = make(Expr::Kind::Literal, line);
        e->literal = next().float_value;
        return e;
      }
      case Token::Kind::Name: {
        const std::string name = next().text;
        auto e = make(Expr::Kind::Literal, line);
        if (name == "true" || name == "True") e->literal = true;
        else if (name == "false" || name == "False") e->literal = false;
        else if (name == "none" || name == "None") e->literal = nullptr;
        else {
          e->kind = Expr::Kind::Name;
          e->name = name;
        }
        return e;
      }
      case Token::Kind::Op:
        if (t.text == "(") {
          next();
          if (accept_op(")")) {
            auto e = make(Expr::Kind::List, line);  // () : an empty tuple
            return e;
          }
          ExprPtr first = parse_expr();
          if (accept_op(")")) return first;
          auto tuple = make(Expr::Kind::List, line);
          tuple->args.push_back(std::move(first));
          while (accept_op(",")) {
            if (peek().kind == Token::Kind::Op && peek().text == ")") break;
            tuple->args.push_back(parse_expr());
          }
          expect_op(")");
          return tuple;
        }
        if (t.text == "[") {
          next();
          auto list = make(Expr::Kind::List, line);
          while (!accept_op("]")) {
            list->args.push_back(parse_expr());
            if (accept_op("]")) break;
            expect_op(",");
          }
          return list;
        }
        if (t.text == "{") {
          next();
          auto dict = make(Expr::Kind::Dict, line);
          while (!accept_op("}")) {
            dict->args.push_back(parse_expr());
            expect_op(":");
            dict->args.push_back(parse_expr());
            if (accept_op("}")) break;
            expect_op(",");
          }
          return dict;
        }
        break;
      default: break;
    }
    fail(line, "expected a value, found " + describe(t));
  }
  void parse_call_args(Expr& call) {
    // after '('
    while (!accept_op(")")) {
      if (peek().kind == Token::Kind::Op && (peek().text == "*" || peek().text == "**"))
        fail(peek().line, "unsupported construct '" + peek().text + "' arguments");
      if (peek().kind == Token::Kind::Name && peek(1).kind == Token::Kind::Op && peek(1).text == "=") {
        std::string key = next().text;
        next();
        call.kwargs.emplace_back(std::move(key), parse_expr());
      } else {
        if (!call.kwargs.empty()) fail(peek().line, "a positional argument after a keyword argument");
        call.args.push_back(parse_expr());
      }
      if (accept_op(")")) break;
      expect_op(",");
    }
  }
  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      const Token& t = peek();
      if (t.kind != Token::Kind::Op) return e;
      const int line = t.line;
      if (t.text == ".") {
        next();
        std::string attr = peek().kind == Token::Kind::Int ? std::to_string(next().int_value) : expect_name("an attribute name");
        auto a = make(Expr::Kind::Attr, line);
        a->name = std::move(attr);
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (t.text == "[") {
        next();
        ExprPtr parts[3];
        bool slice = false;
        int part = 0;
        while (!(peek().kind == Token::Kind::Op && peek().text == "]")) {
          if (accept_op(":")) {
            slice = true;
            if (++part > 2) fail(line, "a slice takes at most three parts");
            continue;
          }
          if (parts[part]) fail(line, "expected ':' or ']' in a subscript");
          parts[part] = parse_expr();
        }
        next();
        if (!slice) {
          if (!parts[0]) fail(line, "an empty subscript");
          auto i = make(Expr::Kind::Item, line);
          i->args.push_back(std::move(e));
          i->args.push_back(std::move(parts[0]));
          e = std::move(i);
        } else {
          auto s = make(Expr::Kind::Slice, line);
          s->args.push_back(std::move(e));
          for (auto& p : parts) s->args.push_back(std::move(p));  // null parts: left out
          e = std::move(s);
        }
      } else if (t.text == "(") {
        next();
        auto c = make(Expr::Kind::Call, line);
        if (e->kind == Expr::Kind::Attr) {
          if (!kMethods.count(e->name)) fail(line, "unsupported construct: the method '" + e->name + "()'");
        } else if (e->kind == Expr::Kind::Name) {
          // a global function or a macro (defined anywhere: checked when called)
        } else {
          fail(line, "unsupported construct: a call of a computed value");
        }
        c->args.push_back(std::move(e));
        parse_call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_filters_and_tests(ExprPtr e) {
    for (;;) {
      if (peek().kind == Token::Kind::Op && peek().text == "|") {
        const int line = next().line;
        std::string name = expect_name("a filter name");
        if (!kFilters.count(name)) fail(line, "unsupported construct: the filter '" + name + "'");
        auto f = make(Expr::Kind::Filter, line);
        f->name = std::move(name);
        f->args.push_back(std::move(e));
        if (accept_op("(")) parse_call_args(*f);
        e = parse_postfix(std::move(f));
      } else if (peek().kind == Token::Kind::Name && peek().text == "is") {
        const int line = next().line;
        auto t = make(Expr::Kind::Test, line);
        t->negated = accept_name("not");
        std::string name;
        if (peek().kind == Token::Kind::Name) name = next().text;
        else fail(line, "expected a test name after 'is'");
        if (name == "None") name = "none";
        if (name == "True") name = "true";
        if (name == "False") name = "false";
        if (!kTests.count(name)) fail(line, "unsupported construct: the test '" + name + "'");
        t->name = std::move(name);
        t->args.push_back(std::move(e));
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Piece> pieces_;
  const std::string& name_;
  size_t at_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  size_t tk_ = 0;
  int depth_ = 0, expr_depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Python's str(), repr() and json.dumps() of the data, as the rendered text shows them.

std::string py_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[48];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s(buf);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min(digits.size(), static_cast<size_t>(exp) + 1));
      while (ip.size() < static_cast<size_t>(exp) + 1) ip += '0';
      const std::string fp = digits.size() > static_cast<size_t>(exp) + 1 ? digits.substr(exp + 1) : "0";
      out += ip + "." + fp;
    } else {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

std::string py_repr_string(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out + q;
}

std::string py_str(const Json& j, bool repr = false) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer: return std::to_string(j.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
    case Json::value_t::number_float: return py_float(j.get<double>());
    case Json::value_t::string: return repr ? py_repr_string(j.get<std::string>()) : j.get<std::string>();
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + py_str(j[i], true);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out += (first ? "" : ", ") + py_repr_string(it.key()) + ": " + py_str(it.value(), true);
        first = false;
      }
      return out + "}";
    }
    default: return "";
  }
}

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buf[16];
    if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80 && ensure_ascii) {
      // One UTF-8 sequence to its code point, written as \uXXXX (a surrogate pair above U+FFFF).
      int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0f : len == 2 ? c & 0x1f : c;
      for (int k = 1; k < len && i + 1 < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[++i]) & 0x3f);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

struct JsonStyle {
  int indent = -1;  // -1: none
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false, ensure_ascii = false;
};

void json_dumps(const Json& j, const JsonStyle& st, int level, std::string& out) {
  auto newline = [&](int lv) {
    if (st.indent >= 0) out += "\n" + std::string(static_cast<size_t>(st.indent * lv), ' ');
  };
  switch (j.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_float: {
      const double d = j.get<double>();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : py_float(d);
      return;
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: out += py_str(j); return;
    case Json::value_t::string: json_string(j.get<std::string>(), st.ensure_ascii, out); return;
    case Json::value_t::array: {
      if (j.empty()) { out += "[]"; return; }
      out += "[";
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out += st.item_sep;
        newline(level + 1);
        json_dumps(j[i], st, level + 1, out);
      }
      newline(level);
      out += "]";
      return;
    }
    case Json::value_t::object: {
      if (j.empty()) { out += "{}"; return; }
      std::vector<std::string> keys;
      for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
      if (st.sort_keys) std::sort(keys.begin(), keys.end());
      out += "{";
      for (size_t i = 0; i < keys.size(); ++i) {
        if (i) out += st.item_sep;
        newline(level + 1);
        json_string(keys[i], st.ensure_ascii, out);
        out += st.key_sep;
        json_dumps(j[keys[i]], st, level + 1, out);
      }
      newline(level);
      out += "}";
      return;
    }
    default: out += "null"; return;
  }
}

// UTF-8 text as its code points (each a string), for len(), indexing and slicing.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> cps;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    len = std::min(len, s.size() - i);
    cps.push_back(s.substr(i, len));
    i += len;
  }
  return cps;
}

bool is_py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip_chars(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  auto strip_it = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_py_space(c); };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_it(s[b])) ++b;
  if (right)
    while (e > b && strip_it(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// ---------------------------------------------------------------------------------------------
// Rendering.

using Scope = std::map<std::string, Value>;

class Renderer {
 public:
  Renderer(const std::string& name, const Json& variables) : name_(name) {
    auto globals = std::make_shared<Scope>();
    for (const char* b : {"range", "namespace", "raise_exception"}) {
      Value v;
      v.kind = Value::Kind::Builtin;
      v.builtin = b;
      (*globals)[b] = v;
    }
    if (variables.is_object())
      for (auto it = variables.begin(); it != variables.end(); ++it) (*globals)[it.key()] = Value::of(it.value());
    scopes_.push_back(globals);
  }

  void run(const Body& body, std::string& out) { exec(body, out); }

 private:
  enum class Flow { Normal, Break, Continue };

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(name_ + ":" + std::to_string(line) + ": " + what);
  }

  Flow exec(const Body& body, std::string& out) {
    for (const auto& n : body) {
      const Flow f = exec_node(*n, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec_node(const Node& n, std::string& out) {
    // A template is a checkpoint's data: its work and output are bounded, as its nesting is.
    if (++steps_ > kMaxSteps) fail(n.line, "the template ran more than a million steps (an endless loop?)");
    if (out.size() > kMaxOutputBytes) fail(n.line, "the rendering passed 64 MiB");
    switch (n.kind) {
      case Node::Kind::Text: out += n.text; return Flow::Normal;
      case Node::Kind::Output: out += str(eval(*n.expr), n.line); return Flow::Normal;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (truthy(eval(*cond))) return exec(body, out);
        return exec(n.else_body, out);
      case Node::Kind::For: return exec_for(n, out);
      case Node::Kind::Set: assign(n, eval(*n.expr)); return Flow::Normal;
      case Node::Kind::SetBlock: {
        std::string text;
        exec(n.body, text);
        assign(n, Value::of(text));
        return Flow::Normal;
      }
      case Node::Kind::Macro: {
        Value v;
        v.kind = Value::Kind::Macro;
        v.macro = &n;
        (*scopes_.back())[n.targets[0]] = v;
        return Flow::Normal;
      }
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void assign(const Node& n, Value v) {
    if (n.targets.size() == 1) {
      (*scopes_.back())[n.targets[0]] = std::move(v);
      return;
    }
    Value holder = lookup(n.targets[0]);
    if (holder.kind != Value::Kind::Namespace)
      fail(n.line, "cannot set '" + n.targets[0] + "." + n.targets[1] + "': '" + n.targets[0] + "' is not a namespace()");
    (*holder.ns)[n.targets[1]] = data_of(v, n.line);
  }

  Flow exec_for(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    Json items = Json::array();
    if (seq.is_data()) {
      const Json& d = seq.data;
      if (d.is_array()) items = d;
      else if (d.is_object())
        for (auto it = d.begin(); it != d.end(); ++it) items.push_back(it.key());
      else if (d.is_string())
        for (const std::string& cp : code_points(d.get<std::string>())) items.push_back(cp);
      else fail(n.line, "cannot loop over " + type_name(seq));
    } else if (!seq.is_undefined()) {
      fail(n.line, "cannot loop over " + type_name(seq));
    }
    auto bind = [&](Scope& scope, const Json& item) {
      if (n.targets.size() == 1) {
        scope[n.targets[0]] = Value::of(item);
        return;
      }
      if (!item.is_array() || item.size() != n.targets.size())
        fail(n.line, "cannot unpack " + py_str(item, true) + " into " + std::to_string(n.targets.size()) + " names");
      for (size_t k = 0; k < n.targets.size(); ++k) scope[n.targets[k]] = Value::of(item[k]);
    };
    if (n.filter) {
      Json kept = Json::array();
      for (const Json& item : items) {
        scopes_.push_back(std::make_shared<Scope>());
        bind(*scopes_.back(), item);
        const bool keep = truthy(eval(*n.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      if (++steps_ > kMaxSteps) fail(n.line, "the template ran more than a million steps (an endless loop?)");
      auto scope = std::make_shared<Scope>();
      bind(*scope, items[static_cast<size_t>(i)]);
      Json loop = {{"index", i + 1},      {"index0", i},          {"revindex", len - i}, {"revindex0", len - i - 1},
                   {"first", i == 0},     {"last", i == len - 1}, {"length", len}};
      if (i > 0) loop["previtem"] = items[static_cast<size_t>(i - 1)];
      if (i + 1 < len) loop["nextitem"] = items[static_cast<size_t>(i + 1)];
      (*scope)["loop"] = Value::of(std::move(loop));
      scopes_.push_back(scope);
      const Flow f = exec(n.body, out);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    if (len == 0) exec(n.else_body, out);
    return Flow::Normal;
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    return Value::undefined("'" + name + "'");
  }

  static std::string type_name(const Value& v) {
    switch (v.kind) {
      case Value::Kind::Undefined: return "an undefined value (" + v.what + ")";
      case Value::Kind::Namespace: return "a namespace";
      case Value::Kind::Macro: return "a macro";
      case Value::Kind::Builtin: return "the function " + v.builtin;
      case Value::Kind::Data: break;
    }
    switch (v.data.type()) {
      case Json::value_t::null: return "none";
      case Json::value_t::boolean: return "a boolean";
      case Json::value_t::string: return "a string";
      case Json::value_t::array: return "a list";
      case Json::value_t::object: return "a mapping";
      default: return "a number";
    }
  }

  Json data_of(const Value& v, int line) const {
    if (v.is_data()) return v.data;
    if (v.is_undefined()) fail(line, v.what + " is undefined");
    if (v.kind == Value::Kind::Namespace) return *v.ns;
    fail(line, "cannot use " + type_name(v) + " as data");
  }

  static bool truthy(const Value& v) {
    switch (v.kind) {
      case Value::Kind::Undefined: return false;
      case Value::Kind::Data: break;
      default: return true;
    }
    const Json& d = v.data;
    switch (d.type()) {
      case Json::value_t::null: return false;
      case Json::value_t::boolean: return d.get<bool>();
      case Json::value_t::number_integer: return d.get<int64_t>() != 0;
      case Json::value_t::number_unsigned: return d.get<uint64_t>() != 0;
      case Json::value_t::number_float: return d.get<double>() != 0;
      case Json::value_t::string:
      case Json::value_t::array:
      case Json::value_t::object: return !d.empty();
      default: return false;
    }
  }

  std::string str(const Value& v, int line) const {
    if (v.is_undefined()) return "";
    if (v.is_data()) return py_str(v.data);
    if (v.kind == Value::Kind::Namespace) return "<Namespace " + py_str(*v.ns) + ">";
    fail(line, "cannot print " + type_name(v));
  }

  const Json& need(const Value& v, int line, const std::string& what) const {
    if (v.is_undefined()) fail(line, v.what + " is undefined (" + what + ")");
    if (!v.is_data()) fail(line, "cannot use " + type_name(v) + " in " + what);
    return v.data;
  }

  static bool is_number(const Json& j) { return j.is_number(); }
  static double num(const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return Value::of(e.literal);
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::Attr: {
        const Value obj = eval(*e.args[0]);
        return attr(obj, e.name, e.line, *e.args[0]);
      }
      case Expr::Kind::Item: {
        const Value obj = eval(*e.args[0]);
        const Value key = eval(*e.args[1]);
        return item(obj, key, e.line);
      }
      case Expr::Kind::Slice: return slice(e);
      case Expr::Kind::Call: return call(e);
      case Expr::Kind::Filter: return filter(e);
      case Expr::Kind::Test: return Value::of(test(e) != e.negated);
      case Expr::Kind::Not: return Value::of(!truthy(eval(*e.args[0])));
      case Expr::Kind::Neg: {
        const Value operand = eval(*e.args[0]);
        const Json& d = need(operand, e.line, "'-'");
        if (d.is_number_integer()) return Value::of(-d.get<int64_t>());
        if (d.is_number()) return Value::of(-d.get<double>());
        fail(e.line, "cannot negate a non-number");
      }
      case Expr::Kind::And: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case Expr::Kind::Cond:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args.size() > 2 ? eval(*e.args[2]) : Value::undefined("the 'else' left out of a conditional");
      case Expr::Kind::List: {
        Json arr = Json::array();
        for (const auto& a : e.args) {
          const Value v = eval(*a);
          arr.push_back(v.is_undefined() ? Json(nullptr) : data_of(v, e.line));
        }
        return Value::of(std::move(arr));
      }
      case Expr::Kind::Dict: {
        Json obj = Json::object();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          const Json key = need(eval(*e.args[k]), e.line, "a dict key");
          const Value v = eval(*e.args[k + 1]);
          obj[key.is_string() ? key.get<std::string>() : py_str(key)] = v.is_undefined() ? Json(nullptr) : data_of(v, e.line);
        }
        return Value::of(std::move(obj));
      }
      case Expr::Kind::Binary: return binary(e);
    }
    fail(e.line, "unsupported expression");
  }

  Value attr(const Value& obj, const std::string& name, int line, const Expr& of) const {
    if (obj.is_undefined()) fail(line, obj.what + " is undefined (no attribute '" + name + "')");
    if (obj.kind == Value::Kind::Namespace) {
      if (obj.ns->contains(name)) return Value::of((*obj.ns)[name]);
      return Value::undefined("namespace attribute '" + name + "'");
    }
    if (obj.is_data() && obj.data.is_object() && obj.data.contains(name)) return Value::of(obj.data[name]);
    std::string what = of.kind == Expr::Kind::Name ? of.name : "the value";
    return Value::undefined("'" + what + "." + name + "'");
  }

  static int64_t wrap_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

  Value item(const Value& obj, const Value& key, int line) const {
    if (obj.is_undefined()) fail(line, obj.what + " is undefined (subscripted)");
    if (obj.kind == Value::Kind::Namespace) {
      const Json& k = need(key, line, "a subscript");
      if (k.is_string() && obj.ns->contains(k.get<std::string>())) return Value::of((*obj.ns)[k.get<std::string>()]);
      return Value::undefined("a namespace item");
    }
    const Json& d = need(obj, line, "a subscript");
    const Json& k = need(key, line, "a subscript");
    if (d.is_object()) {
      const std::string ks = k.is_string() ? k.get<std::string>() : py_str(k);
      if (d.contains(ks)) return Value::of(d[ks]);
      return Value::undefined("the key " + py_str(k, true));
    }
    if ((d.is_array() || d.is_string()) && k.is_number_integer()) {
      if (d.is_array()) {
        const int64_t i = wrap_index(k.get<int64_t>(), static_cast<int64_t>(d.size()));
        if (i >= 0 && i < static_cast<int64_t>(d.size())) return Value::of(d[static_cast<size_t>(i)]);
      } else {
        const auto cps = code_points(d.get<std::string>());
        const int64_t i = wrap_index(k.get<int64_t>(), static_cast<int64_t>(cps.size()));
        if (i >= 0 && i < static_cast<int64_t>(cps.size())) return Value::of(cps[static_cast<size_t>(i)]);
      }
      return Value::undefined("the index " + py_str(k));
    }
    return Value::undefined("the item " + py_str(k, true) + " of " + type_name(obj));
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    const Json& d = need(obj, e.line, "a slice");
    std::optional<int64_t> part[3];
    for (int k = 0; k < 3; ++k) {
      if (!e.args[1 + k]) continue;
      const Value v = eval(*e.args[1 + k]);
      if (v.is_data() && v.data.is_null()) continue;
      const Json& j = need(v, e.line, "a slice bound");
      if (!j.is_number_integer()) fail(e.line, "slice bounds must be integers");
      part[k] = j.get<int64_t>();
    }
    std::vector<Json> elems;
    if (d.is_array()) {
      for (const Json& x : d) elems.push_back(x);
    } else if (d.is_string()) {
      for (const std::string& cp : code_points(d.get<std::string>())) elems.push_back(cp);
    } else {
      fail(e.line, "cannot slice " + type_name(obj));
    }
    const int64_t n = static_cast<int64_t>(elems.size());
    const int64_t step = part[2].value_or(1);
    if (step == 0) fail(e.line, "slice step cannot be zero");
    auto clampi = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t i = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t start = clampi(part[0], step > 0 ? 0 : n - 1), stop = clampi(part[1], step > 0 ? n : -1);
    Json arr = Json::array();
    std::string s;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (d.is_array()) arr.push_back(elems[static_cast<size_t>(i)]);
      else s += elems[static_cast<size_t>(i)].get<std::string>();
    }
    return d.is_array() ? Value::of(std::move(arr)) : Value::of(s);
  }

  // Positional and keyword arguments of a call or filter (args from index `first`).
  struct Args {
    std::vector<Value> pos;
    std::map<std::string, Value> kw;
    const Value* get(size_t i, const std::string& name) const {
      if (i < pos.size()) return &pos[i];
      auto f = kw.find(name);
      return f == kw.end() ? nullptr : &f->second;
    }
  };
  Args eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.kw[k] = eval(*v);
    return a;
  }

  std::string arg_string(const Args& a, size_t i, const std::string& name, int line, const std::string& fn) const {
    const Value* v = a.get(i, name);
    if (!v) fail(line, fn + ": missing argument '" + name + "'");
    const Json& j = need(*v, line, fn);
    if (!j.is_string()) fail(line, fn + ": '" + name + "' must be a string");
    return j.get<std::string>();
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::Attr) {
      const Value obj = eval(*callee.args[0]);
      return method(obj, callee.name, eval_args(e, 1), e.line);
    }
    const Value f = lookup(callee.name);
    const Args a = eval_args(e, 1);
    if (f.kind == Value::Kind::Macro) return call_macro(*f.macro, a, e.line);
    if (f.kind == Value::Kind::Builtin) {
      if (f.builtin == "raise_exception") {
        const Value* m = a.get(0, "message");
        fail(e.line, "the template raised an exception: " + (m ? str(*m, e.line) : std::string()));
      }
      if (f.builtin == "namespace") {
        Value v;
        v.kind = Value::Kind::Namespace;
        v.ns = std::make_shared<Json>(Json::object());
        for (const Value& p : a.pos) {
          const Json& d = need(p, e.line, "namespace()");
          if (!d.is_object()) fail(e.line, "namespace() takes a mapping or keyword arguments");
          for (auto it = d.begin(); it != d.end(); ++it) (*v.ns)[it.key()] = it.value();
        }
        for (const auto& [k, val] : a.kw) (*v.ns)[k] = data_of(val, e.line);
        return v;
      }
      // range
      std::vector<int64_t> r;
      for (const Value& p : a.pos) {
        const Json& d = need(p, e.line, "range()");
        if (!d.is_number_integer()) fail(e.line, "range() takes integers");
        r.push_back(d.get<int64_t>());
      }
      if (r.empty() || r.size() > 3) fail(e.line, "range() takes 1 to 3 integers");
      const int64_t start = r.size() == 1 ? 0 : r[0], stop = r.size() == 1 ? r[0] : r[1], step = r.size() == 3 ? r[2] : 1;
      if (step == 0) fail(e.line, "range() step cannot be zero");
      if ((stop - start) / step > 1'000'000) fail(e.line, "range() of more than a million items");
      Json arr = Json::array();
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) arr.push_back(i);
      return Value::of(std::move(arr));
    }
    if (f.is_undefined()) fail(e.line, "'" + callee.name + "' is undefined (not a macro or a supported function: " +
                                           "kplan knows range, namespace, raise_exception)");
    fail(e.line, "'" + callee.name + "' is " + type_name(f) + ", not callable");
  }

  Value call_macro(const Node& m, const Args& a, int line) {
    DepthGuard guard(macro_depth_, kMaxMacroDepth, [&] {
      fail(line, "macro '" + m.targets[0] + "' called more than 64 deep (endless recursion?)");
    });
    if (a.pos.size() > m.params.size())
      fail(line, "macro '" + m.targets[0] + "' takes " + std::to_string(m.params.size()) + " arguments, given " +
                     std::to_string(a.pos.size()));
    for (const auto& [k, v] : a.kw) {
      bool known = false;
      for (const auto& p : m.params) known = known || p.first == k;
      if (!known) fail(line, "macro '" + m.targets[0] + "' has no parameter '" + k + "'");
    }
    std::vector<std::shared_ptr<Scope>> saved = scopes_;
    scopes_ = {saved.front(), std::make_shared<Scope>()};
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [pname, def] = m.params[i];
      if (const Value* v = a.get(i, pname)) (*scopes_.back())[pname] = *v;
      else if (def) (*scopes_.back())[pname] = eval(*def);
      else (*scopes_.back())[pname] = Value::undefined("'" + pname + "'");
    }
    std::string out;
    try {
      exec(m.body, out);
    } catch (...) {
      scopes_ = saved;
      throw;
    }
    scopes_ = saved;
    return Value::of(out);
  }

  Value method(const Value& obj, const std::string& name, const Args& a, int line) {
    const Json& d = need(obj, line, "." + name + "()");
    const std::string fn = "." + name + "()";
    if (d.is_object()) {
      if (name == "get") {
        const Value* k = a.get(0, "key");
        if (!k) fail(line, fn + ": missing the key");
        const Json& kj = need(*k, line, fn);
        const std::string ks = kj.is_string() ? kj.get<std::string>() : py_str(kj);
        if (d.contains(ks)) return Value::of(d[ks]);
        const Value* def = a.get(1, "default");
        return def ? *def : Value::of(nullptr);
      }
      if (name == "items" || name == "keys" || name == "values") {
        Json arr = Json::array();
        for (auto it = d.begin(); it != d.end(); ++it) {
          if (name == "items") arr.push_back(Json::array({it.key(), it.value()}));
          else if (name == "keys") arr.push_back(it.key());
          else arr.push_back(it.value());
        }
        return Value::of(std::move(arr));
      }
    }
    if (d.is_string()) {
      const std::string s = d.get<std::string>();
      auto opt_chars = [&](size_t i) -> std::optional<std::string> {
        const Value* v = a.get(i, "chars");
        if (!v || (v->is_data() && v->data.is_null())) return std::nullopt;
        return arg_string(a, i, "chars", line, fn);
      };
      if (name == "strip") return Value::of(strip_chars(s, opt_chars(0), true, true));
      if (name == "lstrip") return Value::of(strip_chars(s, opt_chars(0), true, false));
      if (name == "rstrip") return Value::of(strip_chars(s, opt_chars(0), false, true));
      if (name == "upper" || name == "lower") {
        std::string r = s;
        for (char& c : r) c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                                : std::tolower(static_cast<unsigned char>(c)));
        return Value::of(r);
      }
      if (name == "startswith" || name == "endswith") {
        const Value* p = a.get(0, "prefix");
        if (!p) fail(line, fn + ": missing the prefix");
        const Json& pj = need(*p, line, fn);
        std::vector<std::string> opts;
        if (pj.is_string()) opts.push_back(pj.get<std::string>());
        else if (pj.is_array())
          for (const Json& x : pj)
            if (x.is_string()) opts.push_back(x.get<std::string>());
        for (const std::string& o : opts) {
          if (name == "startswith" && s.rfind(o, 0) == 0) return Value::of(true);
          if (name == "endswith" && s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0)
            return Value::of(true);
        }
        return Value::of(false);
      }
      if (name == "find") return Value::of(static_cast<int64_t>(
                                  s.find(arg_string(a, 0, "sub", line, fn)) == std::string::npos
                                      ? -1
                                      : static_cast<int64_t>(s.find(arg_string(a, 0, "sub", line, fn)))));
      if (name == "replace") return Value::of(replace_all(s, arg_string(a, 0, "old", line, fn), arg_string(a, 1, "new", line, fn), -1));
      if (name == "split") {
        const Value* sepv = a.get(0, "sep");
        int64_t maxsplit = -1;
        if (const Value* mv = a.get(1, "maxsplit")) maxsplit = need(*mv, line, fn).get<int64_t>();
        Json arr = Json::array();
        if (!sepv || (sepv->is_data() && sepv->data.is_null())) {  // runs of whitespace
          size_t i = 0;
          while (i < s.size()) {
            while (i < s.size() && is_py_space(s[i])) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(arr.size()) == maxsplit) {
              arr.push_back(strip_chars(s.substr(i), std::nullopt, false, true));
              break;
            }
            size_t j = i;
            while (j < s.size() && !is_py_space(s[j])) ++j;
            arr.push_back(s.substr(i, j - i));
            i = j;
          }
          return Value::of(std::move(arr));
        }
        const std::string sep = arg_string(a, 0, "sep", line, fn);
        if (sep.empty()) fail(line, ".split(): empty separator");
        size_t from = 0;
        for (;;) {
          const size_t at = s.find(sep, from);
          if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(arr.size()) == maxsplit)) break;
          arr.push_back(s.substr(from, at - from));
          from = at + sep.size();
        }
        arr.push_back(s.substr(from));
        return Value::of(std::move(arr));
      }
    }
    fail(line, "'" + name + "()' is not a method of " + type_name(obj) + " that kplan renders");
  }

  static std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count) {
    if (from.empty()) return s;
    size_t at = 0;
    for (int64_t n = 0; count < 0 || n < count; ++n) {
      at = s.find(from, at);
      if (at == std::string::npos) break;
      s.replace(at, from.size(), to);
      at += to.size();
    }
    return s;
  }

  Value filter(const Expr& e) {
    const Value v = eval(*e.args[0]);
    const Args a = eval_args(e, 1);
    const std::string& f = e.name;
    const std::string fn = "|" + f;
    if (f == "default" || f == "d") {
      const Value* b = a.get(1, "boolean");
      const bool boolean = b && truthy(*b);
      if (v.is_undefined() || (boolean && !truthy(v))) {
        const Value* def = a.get(0, "default_value");
        return def ? *def : Value::of("");
      }
      return v;
    }
    if (f == "length" || f == "count") {
      if (v.is_undefined()) return Value::of(0);
      const Json& d = need(v, e.line, fn);
      if (d.is_string()) return Value::of(static_cast<int64_t>(code_points(d.get<std::string>()).size()));
      if (d.is_array() || d.is_object()) return Value::of(static_cast<int64_t>(d.size()));
      fail(e.line, fn + ": " + type_name(v) + " has no length");
    }
    if (f == "string") return Value::of(str(v, e.line));
    if (f == "safe") return v;
    if (f == "tojson") {
      JsonStyle st;
      if (const Value* ind = a.get(0, "indent"); ind && !(ind->is_data() && ind->data.is_null())) {
        const Json& j = need(*ind, e.line, fn);
        if (!j.is_number_integer()) fail(e.line, fn + ": indent must be an integer");
        st.indent = static_cast<int>(std::max<int64_t>(0, j.get<int64_t>()));
        st.item_sep = ",";
      }
      if (const Value* sep = a.kw.count("separators") ? &a.kw.at("separators") : nullptr;
          sep && !(sep->is_data() && sep->data.is_null())) {
        const Json& j = need(*sep, e.line, fn);
        if (!j.is_array() || j.size() != 2 || !j[0].is_string() || !j[1].is_string())
          fail(e.line, fn + ": separators must be a pair of strings");
        st.item_sep = j[0].get<std::string>();
        st.key_sep = j[1].get<std::string>();
      }
      if (a.kw.count("sort_keys")) st.sort_keys = truthy(a.kw.at("sort_keys"));
      if (a.kw.count("ensure_ascii")) st.ensure_ascii = truthy(a.kw.at("ensure_ascii"));
      std::string out;
      json_dumps(data_of(v, e.line), st, 0, out);
      return Value::of(out);
    }
    if (f == "trim") {
      std::optional<std::string> chars;
      if (const Value* c = a.get(0, "chars"); c && !(c->is_data() && c->data.is_null())) chars = arg_string(a, 0, "chars", e.line, fn);
      return Value::of(strip_chars(str(v, e.line), chars, true, true));
    }
    if (f == "upper" || f == "lower" || f == "capitalize") {
      std::string s = str(v, e.line);
      for (size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const bool up = f == "upper" || (f == "capitalize" && i == 0);
        s[i] = static_cast<char>(up ? std::toupper(c) : std::tolower(c));
      }
      return Value::of(s);
    }
    if (f == "replace") {
      int64_t count = -1;
      if (const Value* c = a.get(2, "count")) count = need(*c, e.line, fn).get<int64_t>();
      return Value::of(replace_all(str(v, e.line), arg_string(a, 0, "old", e.line, fn), arg_string(a, 1, "new", e.line, fn), count));
    }
    const Json& d = need(v, e.line, fn);
    auto elements = [&]() {
      Json arr = Json::array();
      if (d.is_array()) arr = d;
      else if (d.is_string())
        for (const std::string& cp : code_points(d.get<std::string>())) arr.push_back(cp);
      else if (d.is_object())
        for (auto it = d.begin(); it != d.end(); ++it) arr.push_back(it.key());
      else fail(e.line, fn + ": " + type_name(v) + " is not a sequence");
      return arr;
    };
    if (f == "first" || f == "last") {
      const Json arr = elements();
      if (arr.empty()) return Value::undefined("the " + f + " item of an empty sequence");
      return Value::of(f == "first" ? arr.front() : arr.back());
    }
    if (f == "list") return Value::of(elements());
    if (f == "reverse") {
      Json arr = elements();
      std::reverse(arr.begin(), arr.end());
      if (!d.is_string()) return Value::of(std::move(arr));
      std::string s;
      for (const Json& x : arr) s += x.get<std::string>();
      return Value::of(s);
    }
    if (f == "join") {
      std::string sep;
      if (const Value* s = a.get(0, "d")) sep = str(*s, e.line);
      std::string out;
      const Json arr = elements();
      for (size_t i = 0; i < arr.size(); ++i) out += (i ? sep : "") + py_str(arr[i]);
      return Value::of(out);
    }
    if (f == "dictsort") {  // Jinja's defaults: by key, case-insensitive
      if (!d.is_object()) fail(e.line, fn + ": " + type_name(v) + " is not a mapping");
      if (a.get(1, "by") && str(*a.get(1, "by"), e.line) != "key") fail(e.line, fn + ": only by='key' is supported");
      const bool case_sensitive = a.get(0, "case_sensitive") && truthy(*a.get(0, "case_sensitive"));
      const bool reverse = a.get(2, "reverse") && truthy(*a.get(2, "reverse"));
      std::vector<std::pair<std::string, std::string>> keys;  // (sort key, key)
      for (auto it = d.begin(); it != d.end(); ++it) {
        std::string k = it.key();
        if (!case_sensitive)
          for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        keys.emplace_back(k, it.key());
      }
      std::stable_sort(keys.begin(), keys.end(), [&](const auto& x, const auto& y) { return reverse ? y.first < x.first : x.first < y.first; });
      Json arr = Json::array();
      for (const auto& [sk, k] : keys) arr.push_back(Json::array({k, d[k]}));
      return Value::of(std::move(arr));
    }
    if (f == "items") {
      if (!d.is_object()) fail(e.line, fn + ": " + type_name(v) + " is not a mapping");
      Json arr = Json::array();
      for (auto it = d.begin(); it != d.end(); ++it) arr.push_back(Json::array({it.key(), it.value()}));
      return Value::of(std::move(arr));
    }
    if (f == "int" || f == "float" || f == "abs") {
      double x = 0;
      if (d.is_number() || d.is_boolean()) {
        if (f == "abs" && d.is_number_integer()) return Value::of(std::llabs(d.get<int64_t>()));
        if (f == "int" && d.is_number_integer()) return v;
        x = num(d);
      } else if (d.is_string() && f != "abs") {
        try {
          x = std::stod(d.get<std::string>());
        } catch (const std::exception&) {
          x = 0;  // Jinja's default
        }
      } else {
        fail(e.line, fn + ": " + type_name(v) + " is not a number");
      }
      if (f == "int") return Value::of(static_cast<int64_t>(x));
      if (f == "abs") return Value::of(std::fabs(x));
      return Value::of(x);
    }
    fail(e.line, "unsupported construct: the filter '" + f + "'");
  }

  bool test(const Expr& e) {
    const Value v = eval(*e.args[0]);
    const std::string& t = e.name;
    if (t == "defined") return !v.is_undefined();
    if (t == "undefined") return v.is_undefined();
    if (t == "mapping") return v.kind == Value::Kind::Namespace || (v.is_data() && v.data.is_object());
    if (!v.is_data()) return false;
    const Json& d = v.data;
    if (t == "none") return d.is_null();
    if (t == "string") return d.is_string();
    if (t == "number") return d.is_number() || d.is_boolean();
    if (t == "integer") return d.is_number_integer();
    if (t == "float") return d.is_number_float();
    if (t == "boolean") return d.is_boolean();
    if (t == "iterable" || t == "sequence") return d.is_array() || d.is_object() || d.is_string();
    if (t == "true") return d.is_boolean() && d.get<bool>();
    if (t == "false") return d.is_boolean() && !d.get<bool>();
    if (t == "odd" || t == "even") {
      if (!d.is_number_integer()) fail(e.line, "'is " + t + "' needs an integer");
      return (d.get<int64_t>() % 2 != 0) == (t == "odd");
    }
    fail(e.line, "unsupported construct: the test '" + t + "'");
  }

  bool equal(const Value& a, const Value& b) const {
    if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
    if (!a.is_data() || !b.is_data()) return false;
    if (a.data.is_number() && b.data.is_number()) return num(a.data) == num(b.data);
    return a.data == b.data;
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    if (op == "==") return Value::of(equal(a, b));
    if (op == "!=") return Value::of(!equal(a, b));
    if (op == "~") return Value::of(str(a, e.line) + str(b, e.line));
    if (op == "in") {
      const Json& hay = need(b, e.line, "'in'");
      bool found = false;
      if (hay.is_string()) {
        const Json& needle = need(a, e.line, "'in'");
        if (!needle.is_string()) fail(e.line, "'in <string>' needs a string on the left, not " + type_name(a));
        found = hay.get<std::string>().find(needle.get<std::string>()) != std::string::npos;
      } else if (hay.is_array()) {
        for (const Json& x : hay) found = found || equal(a, Value::of(x));
      } else if (hay.is_object()) {
        const Json& needle = need(a, e.line, "'in'");
        found = needle.is_string() && hay.contains(needle.get<std::string>());
      } else {
        fail(e.line, "'in' needs a string, list or mapping on the right, not " + type_name(b));
      }
      return Value::of(found != e.negated);
    }
    const Json& x = need(a, e.line, "'" + op + "'");
    const Json& y = need(b, e.line, "'" + op + "'");
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (x.is_number() && y.is_number()) c = num(x) < num(y) ? -1 : num(x) > num(y) ? 1 : 0;
      else if (x.is_string() && y.is_string()) c = x.get<std::string>().compare(y.get<std::string>());
      else fail(e.line, "cannot compare " + type_name(a) + " with " + type_name(b));
      return Value::of(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+") {
      if (x.is_string() && y.is_string()) return Value::of(x.get<std::string>() + y.get<std::string>());
      if (x.is_array() && y.is_array()) {
        Json r = x;
        for (const Json& z : y) r.push_back(z);
        return Value::of(std::move(r));
      }
    }
    if (op == "*" && x.is_string() && y.is_number_integer()) {
      std::string r;
      const std::string& unit = x.get<std::string>();
      const int64_t times = y.get<int64_t>();
      if (times > 0 && unit.size() * static_cast<size_t>(std::min<int64_t>(times, int64_t{1} << 40)) > kMaxOutputBytes)
        fail(e.line, "a string repeated past 64 MiB");
      for (int64_t i = 0; i < times; ++i) r += unit;
      return Value::of(r);
    }
    if (op == "%" && x.is_string()) fail(e.line, "unsupported construct: '%' string formatting");
    if (!(x.is_number() || x.is_boolean()) || !(y.is_number() || y.is_boolean()))
      fail(e.line, "cannot apply '" + op + "' to " + type_name(a) + " and " + type_name(b));
    const bool ints = x.is_number_integer() && y.is_number_integer();
    if (ints && op != "/") {
      const int64_t p = x.get<int64_t>(), q = y.get<int64_t>();
      if (op == "+") return Value::of(p + q);
      if (op == "-") return Value::of(p - q);
      if (op == "*") return Value::of(p * q);
      if (q == 0) fail(e.line, "division by zero");
      int64_t r = p % q, d = p / q;
      if (r != 0 && ((r < 0) != (q < 0))) {
        r += q;
        d -= 1;
      }
      return Value::of(op == "//" ? d : r);
    }
    const double p = num(x), q = num(y);
    if (op == "+") return Value::of(p + q);
    if (op == "-") return Value::of(p - q);
    if (op == "*") return Value::of(p * q);
    if (q == 0) fail(e.line, "division by zero");
    if (op == "/") return Value::of(p / q);
    if (op == "//") return Value::of(std::floor(p / q));
    return Value::of(p - std::floor(p / q) * q);
  }

  const std::string& name_;
  std::vector<std::shared_ptr<Scope>> scopes_;
  int macro_depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

ChatTemplate ChatTemplate::parse(std::string_view source, const std::string& name) {
  // As Jinja reads a source: newlines normalised to \n, one trailing newline dropped.
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  ChatTemplate t;
  t.name_ = name;
  auto program = std::make_shared<ChatTemplateProgram>();
  program->body = Parser(Lexer(src, name).run(), name).parse_all();
  t.program_ = std::move(program);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  std::string out;
  Renderer(name_, variables).run(program_->body, out);
  return out;
}

std::optional<std::string> select_chat_template(const nlohmann::json& config, const std::optional<std::string>& jinja_text,
                                                const std::string& config_name) {
  if (jinja_text) return jinja_text;
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return std::nullopt;
  const nlohmann::json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (!t.is_array())
    throw Error(config_name + ": chat_template must be a string or a list of {\"name\", \"template\"} objects");
  std::string names;
  for (const nlohmann::json& entry : t) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string())
      throw Error(config_name + ": each chat_template list entry must be {\"name\": string, \"template\": string}");
    if (entry["name"] == "default") return entry["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
  }
  throw Error(config_name + ": chat_template lists templates named " + (names.empty() ? "(none)" : names) +
              " but none named \"default\", the one kplan renders");
}

std::string special_token_text(const nlohmann::json& config, const std::string& key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace kplan::tokenizer
