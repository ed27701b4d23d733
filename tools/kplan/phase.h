#pragma once
// A phase of a command that can take a while (opening and checksumming a plan, loading weights,
// validating a checkpoint, compiling kernels, writing a synthetic checkpoint), made visible on
// stderr. On a terminal "kplan run: opening plan.kplan (verifying its weights' checksums) ..." at
// the start; a phase fed its work's counters (progress(done, total)) redraws it in place with \r,
// at most ~10 times a second, as a bar with rate and ETA (progress_bar.h):
//   kplan run: opening plan.kplan (...) [#####               ] 0.92/1.80 GiB 1.3 GiB/s ETA 0.7 s
// and its time at the end. Elsewhere (pipes, logs, tests) one line after the fact, only when it
// took longer than a second ("kplan run: opening plan.kplan (...): 1.80 GiB in 1.4 s (1.3
// GiB/s)"). --quiet silences both. The seconds are kept for --stats.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "tools/kplan/progress_bar.h"

namespace kplan::cli {

class Phase {
 public:
  Phase(std::string command, std::string what, bool quiet, ProgressUnit unit = ProgressUnit::byte_count())
      : command_(std::move(command)), what_(std::move(what)), unit_(std::move(unit)), quiet_(quiet),
        tty_(isatty(STDERR_FILENO) == 1), throttle_(0.0) {
    if (!quiet_ && tty_) {
      std::fprintf(stderr, "%s: %s ...", command_.c_str(), what_.c_str());
      std::fflush(stderr);
    }
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

  // The work's counters: `done` of `total` units (total 0: unknown). Thread-safe (kernel
  // compiles report from their worker threads); cheap when not drawn.
  void progress(uint64_t done, uint64_t total) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    done_ = done;
    total_ = total;
    if (quiet_ || !tty_) return;
    const double now = elapsed();
    if (!throttle_.should_draw(now, false)) return;
    draw(progress::progress_line(command_, what_, done_, total_, unit_, now));
  }
  // Adapters for callbacks that report (done, total) through a C function pointer.
  static void progress_callback(void* phase, uint64_t done, uint64_t total) {
    static_cast<Phase*>(phase)->progress(done, total);
  }

  // Ends the phase (once); returns its seconds.
  double done() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return seconds_;
    ended_ = true;
    seconds_ = elapsed();
    if (quiet_) return seconds_;
    if (tty_ && drawn_) {
      // The bar's last state, complete, with the phase's time in place of its ETA.
      std::string line = command_ + ": " + what_ + " ";
      if (total_ > 0) line += progress::render_bar(done_, total_, progress::kBarWidth) + " ";
      line += progress::format_amount(done_, total_, unit_);
      const std::string rate = progress::format_rate(done_, seconds_, unit_);
      if (!rate.empty()) line += " " + rate;
      draw(line + " " + progress::format_duration(seconds_));
      std::fputc('\n', stderr);
    } else if (tty_) {
      std::fprintf(stderr, " %.1f s\n", seconds_);
    } else if (seconds_ > 1.0) {
      std::fprintf(stderr, "%s\n", progress::summary_line(command_, what_, done_, unit_, seconds_).c_str());
    }
    return seconds_;
  }
  ~Phase() {
    if (!ended_ && !quiet_ && tty_) std::fputc('\n', stderr);  // failed: end the line for the error
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  static int columns() {
    winsize w{};
    return ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 ? w.ws_col : 0;
  }
  void draw(const std::string& line) {
    // \r, the line cut to the terminal's width (a wrapped line would not be redrawn in place),
    // then erase what a longer earlier line left.
    std::fprintf(stderr, "\r%s\033[K", progress::fit_width(line, columns()).c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  std::string command_, what_;
  ProgressUnit unit_;
  bool quiet_, tty_;
  progress::RedrawThrottle throttle_;
  std::mutex mutex_;
  bool ended_ = false, drawn_ = false;
  uint64_t done_ = 0, total_ = 0;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kplan::cli
