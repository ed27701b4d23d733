#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "ir/support/error.h"

namespace kplan::tokenizer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

const std::string& kimi_pattern() {
  // Letters that are not Han: upper/title-case-led words, lower-case-led words (with English
  // contractions), digits in groups of 1-3, punctuation runs, newlines, other whitespace.
  static const std::string pattern =
      R"([\p{Han}]+)"
      R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*)"
      R"((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
      R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+)"
      R"((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
      R"(|\p{N}{1,3})"
      R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
      R"(|\s*[\r\n]+)"
      R"(|\s+(?!\S))"
      R"(|\s+)";
  return pattern;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::string& pattern) : compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!compiled_->code)
    throw Error("tokenizer: pre-tokenizer regex does not compile at offset " + std::to_string(offset) +
                ": " + pcre2_message(error));
  // JIT is an optimisation only: where it is unavailable the interpreter gives the same pieces.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// A word-class branch of the pattern repeats a lookahead group per character, and a repeat costs
// the JIT a stack frame: PCRE2's default 32 KiB JIT stack ends a word at a few thousand
// characters ("JIT stack limit reached"). A text is split with a JIT stack that grows to 64 MiB,
// and a match that still runs out falls back to the interpreter, whose backtracking frames live
// on the heap (allowed 1 GiB), so a long word (a base64 blob, a long run of one letter) is one
// piece, as tiktoken makes it.
constexpr PCRE2_SIZE kJitStackStart = 32 * 1024;
constexpr PCRE2_SIZE kJitStackMax = 64 * 1024 * 1024;
constexpr uint32_t kHeapLimitKiB = 1024 * 1024;

struct MatchContext {
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
  MatchContext() {
    if (!context || !stack) throw Error("tokenizer: out of memory for the regex match context");
    pcre2_jit_stack_assign(context, nullptr, stack);
    pcre2_set_heap_limit(context, kHeapLimitKiB);
  }
  ~MatchContext() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
  MatchContext(const MatchContext&) = delete;
  MatchContext& operator=(const MatchContext&) = delete;
};

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  if (!data) throw Error("tokenizer: out of memory for regex match data");
  pcre2_match_data* match = data.get();
  MatchContext mc;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  // The UTF check runs once on the whole text; later matches start on piece boundaries.
  uint32_t options = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), pos, options, match, mc.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(compiled_->code, subject, text.size(), pos, options | PCRE2_NO_JIT, match, mc.context);
    if (rc < 0) {
      if (rc == PCRE2_ERROR_NOMATCH) {
        // Unreachable with the Kimi pattern (\s+ and the punctuation branch cover everything);
        // a custom pattern may leave text unmatched, which tiktoken also drops.
        break;
      }
      if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
        throw Error("tokenizer: the text is not valid UTF-8 (" + pcre2_message(rc) + ")");
      throw Error("tokenizer: regex match failed at byte " + std::to_string(pos) + " of " +
                  std::to_string(text.size()) + ": " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    if (ov[1] == ov[0]) {  // an empty match: step one character on, as tiktoken's iterator does
      pos = ov[1] + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    } else {
      pieces.push_back(text.substr(ov[0], ov[1] - ov[0]));
      pos = ov[1];
    }
    options = PCRE2_NO_UTF_CHECK;
  }
  return pieces;
}

}  // namespace kplan::tokenizer
