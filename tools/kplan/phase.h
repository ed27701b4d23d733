#pragma once
// A phase of a command that can take a while (opening and checksumming a plan, loading weights,
// writing a synthetic checkpoint), made visible on stderr: on a terminal "kplan run: opening
// plan.kplan (verifying 1.80 GiB of weights) ..." at the start and its time at the end; elsewhere
// (pipes, logs, tests) one line after the fact, only when it took longer than a second.
// --quiet silences both. The seconds are kept for --stats.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace kplan::cli {

class Phase {
 public:
  Phase(std::string command, std::string what, bool quiet)
      : command_(std::move(command)), what_(std::move(what)), quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {
    if (!quiet_ && tty_) {
      std::fprintf(stderr, "%s: %s ...", command_.c_str(), what_.c_str());
      std::fflush(stderr);
    }
  }
  // Ends the phase (once); returns its seconds.
  double done() {
    if (ended_) return seconds_;
    ended_ = true;
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (quiet_) return seconds_;
    if (tty_)
      std::fprintf(stderr, " %.1f s\n", seconds_);
    else if (seconds_ > 1.0)
      std::fprintf(stderr, "%s: %s: %.1f s\n", command_.c_str(), what_.c_str(), seconds_);
    return seconds_;
  }
  ~Phase() {
    if (!ended_ && !quiet_ && tty_) std::fputc('\n', stderr);  // failed: end the line for the error
  }

 private:
  std::string command_, what_;
  bool quiet_, tty_;
  bool ended_ = false;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kplan::cli
