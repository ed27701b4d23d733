#pragma once
// The text of a decode as a reader wants it, token by token: the EOS token's text left out (when
// the decode stops at EOS), cut where a stop string begins, and handed out in pieces that can no
// longer change (held back: what could still be the start of a stop string, an incomplete UTF-8
// sequence). `kplan serve` streams its pieces as server-sent events, `kplan chat` to the terminal.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kplan/kplan.h"
#include "tools/kplan/model_source.h"

namespace kplan::cli {

// The bytes of `text` up to `upto`, moved back to the start of an incomplete UTF-8 sequence.
inline size_t utf8_boundary(const std::string& text, size_t upto) {
  size_t lead = upto;
  for (int k = 0; k < 4 && lead > 0; ++k) {
    const unsigned char c = static_cast<unsigned char>(text[lead - 1]);
    if ((c & 0xC0) != 0x80) {  // the last sequence's lead byte (or ASCII) is at lead - 1
      const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return lead - 1 + len > upto ? lead - 1 : upto;
    }
    --lead;
  }
  return upto;
}

// The text a decode makes, as OpenAI returns it: the EOS token's text left out, cut where a stop
// string begins; `take()` hands out what can no longer change (held back: a possible stop-string
// start, an incomplete UTF-8 sequence).
class TextAssembler {
 public:
  TextAssembler(const kplan_plan* plan, bool has_tokenizer, std::vector<int64_t> eos, bool stop_at_eos,
                std::vector<std::string> stops)
      : plan_(plan), has_tokenizer_(has_tokenizer), eos_(std::move(eos)), stop_at_eos_(stop_at_eos), stops_(std::move(stops)) {
    for (const std::string& s : stops_) hold_ = std::max(hold_, s.size() - 1);
  }
  void push(int32_t token) {
    if (cut_ || !has_tokenizer_) return;
    if (stop_at_eos_ && std::find(eos_.begin(), eos_.end(), token) != eos_.end()) return;
    text_ += decode_tokens(plan_, std::span<const int32_t>(&token, 1));
    for (const std::string& s : stops_) {
      const size_t at = text_.find(s);
      if (at != std::string::npos && at < end_) end_ = at;
    }
    if (end_ != std::string::npos) {
      text_.resize(end_);
      cut_ = true;
    }
  }
  // New text that can be sent now; `final`: all of it.
  std::string take(bool final) {
    size_t upto = text_.size();
    if (!final && !cut_) upto = utf8_boundary(text_, upto > hold_ ? upto - hold_ : 0);
    if (upto <= sent_) return "";
    std::string piece = text_.substr(sent_, upto - sent_);
    sent_ = upto;
    return piece;
  }
  const std::string& text() const { return text_; }

 private:
  const kplan_plan* plan_;
  bool has_tokenizer_;
  std::vector<int64_t> eos_;
  bool stop_at_eos_;
  std::vector<std::string> stops_;
  size_t hold_ = 0, sent_ = 0, end_ = std::string::npos;
  std::string text_;
  bool cut_ = false;
};

}  // namespace kplan::cli
