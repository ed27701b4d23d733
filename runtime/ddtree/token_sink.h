#pragma once
// Collects a decode's new tokens and says when to stop: max_new tokens emitted, an EOS id
// emitted (kept in the output), or the caller's on_token callback answered false (streaming, stop
// strings: the token it saw is kept).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace kplan {

class TokenSink {
 public:
  TokenSink(int64_t max_new, std::span<const int64_t> eos_ids, std::function<bool(int32_t)> on_token = {})
      : max_new_(max_new), eos_ids_(eos_ids.begin(), eos_ids.end()), on_token_(std::move(on_token)) {}

  // Appends a token; ignored once done.
  void push(int32_t token) {
    if (done()) return;
    tokens_.push_back(token);
    for (int64_t eos : eos_ids_)
      if (token == eos) saw_eos_ = true;
    if (on_token_ && !on_token_(token)) stopped_ = true;
  }
  bool done() const { return saw_eos_ || stopped_ || remaining() <= 0; }
  int64_t remaining() const { return max_new_ - static_cast<int64_t>(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  int64_t max_new_;
  std::vector<int64_t> eos_ids_;
  std::function<bool(int32_t)> on_token_;
  std::vector<int32_t> tokens_;
  bool saw_eos_ = false, stopped_ = false;
};

}  // namespace kplan
