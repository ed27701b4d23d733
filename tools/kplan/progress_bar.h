#pragma once
// A phase's progress as text, in plain functions (tests/unit/cli/progress_bar_test.cc): amounts
// ("0.92/1.80 GiB", "12/40 kernels"), the rate ("1.3 GiB/s"), the ETA ("ETA 0.7 s"), the bar
// ("[#####     ]"), the whole line a terminal shows
//   kplan run: verifying weights [#####     ] 0.92/1.80 GiB 1.3 GiB/s ETA 0.7 s
// and the throttle that keeps redraws to about ten a second. The counts come from the work's own
// counters (bytes hashed, shards opened, kernels compiled, bytes written), never from a timer;
// phase.h draws them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace kplan::cli {

// What a phase counts: bytes (shown in B / KiB / MiB / GiB) or items of a named kind.
struct ProgressUnit {
  bool bytes = true;
  std::string items;  // items: their name ("kernels", "shards"); empty for bytes

  static ProgressUnit byte_count() { return {}; }
  static ProgressUnit count(std::string name) { return {false, std::move(name)}; }
};

namespace progress {

inline std::string printf_text(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

// The binary prefix a byte amount reads best in: 0 B, 1 KiB, 2 MiB, 3 GiB, 4 TiB.
inline int byte_scale(double bytes) {
  int scale = 0;
  while (scale < 4 && bytes >= 1024.0 * 0.995) {  // 1023.9 KiB reads as 1.00 MiB, not 1024.0 KiB
    bytes /= 1024.0;
    ++scale;
  }
  return scale;
}

inline const char* byte_suffix(int scale) {
  static const char* const kSuffix[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  return kSuffix[std::clamp(scale, 0, 4)];
}

// A number at a given binary scale: three significant digits ("0.92", "12.3", "512"); bytes
// (scale 0) whole.
inline std::string scaled_number(double bytes, int scale) {
  const double v = bytes / std::pow(1024.0, scale);
  if (scale == 0) return printf_text("%.0f", v);
  if (v < 10) return printf_text("%.2f", v);
  if (v < 100) return printf_text("%.1f", v);
  return printf_text("%.0f", v);
}

// "512 B", "1.50 KiB", "12.3 MiB", "1.80 GiB".
inline std::string format_bytes(double bytes) {
  const int scale = byte_scale(bytes);
  return scaled_number(bytes, scale) + " " + byte_suffix(scale);
}

// done of total, both in the total's unit: "0.92/1.80 GiB", "3/40 kernels"; without a total
// (0) the done part alone: "12.3 MiB", "3 kernels".
inline std::string format_amount(uint64_t done, uint64_t total, const ProgressUnit& unit) {
  if (!unit.bytes) {
    std::string s = std::to_string(done);
    if (total > 0) s += "/" + std::to_string(total);
    return unit.items.empty() ? s : s + " " + unit.items;
  }
  if (total == 0) return format_bytes(static_cast<double>(done));
  const int scale = byte_scale(static_cast<double>(total));
  return scaled_number(static_cast<double>(done), scale) + "/" + scaled_number(static_cast<double>(total), scale) + " " +
         byte_suffix(scale);
}

// The rate of `done` units over `seconds`: "1.3 GiB/s", "850 MiB/s", "12.5 kernels/s"; empty when
// nothing can be said yet (no time elapsed or nothing done).
inline std::string format_rate(uint64_t done, double seconds, const ProgressUnit& unit) {
  if (!(seconds > 0) || done == 0) return "";
  const double rate = static_cast<double>(done) / seconds;
  if (unit.bytes) {
    const int scale = byte_scale(rate);
    const double v = rate / std::pow(1024.0, scale);
    return (v < 10 ? printf_text("%.1f", v) : printf_text("%.0f", v)) + " " + byte_suffix(scale) + "/s";
  }
  const std::string n = rate < 10 ? printf_text("%.1f", rate) : printf_text("%.0f", rate);
  return n + (unit.items.empty() ? "" : " " + unit.items) + "/s";
}

// The seconds left at the rate so far; none before anything is done, or without a total.
inline std::optional<double> eta_seconds(uint64_t done, uint64_t total, double elapsed) {
  if (done == 0 || total == 0 || !(elapsed > 0)) return std::nullopt;
  if (done >= total) return 0.0;
  return elapsed * static_cast<double>(total - done) / static_cast<double>(done);
}

// A duration as a person reads it: "0.7 s", "12 s", "2 min 05 s", "1 h 02 min".
inline std::string format_duration(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "?";
  if (seconds < 9.95) return printf_text("%.1f s", seconds);
  const long long s = std::llround(seconds);
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%lld s", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", s / 3600, s / 60 % 60);
  }
  return buf;
}

// "ETA 0.7 s"; empty when the ETA is unknown.
inline std::string format_eta(uint64_t done, uint64_t total, double elapsed) {
  const std::optional<double> eta = eta_seconds(done, total, elapsed);
  return eta ? "ETA " + format_duration(*eta) : "";
}

// "[#####     ]": `width` cells, done/total of them filled (all empty without a total).
inline std::string render_bar(uint64_t done, uint64_t total, int width) {
  width = std::max(width, 1);
  int filled = 0;
  if (total > 0)
    filled = static_cast<int>(static_cast<double>(std::min(done, total)) / static_cast<double>(total) * width);
  return "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), ' ') + "]";
}

inline constexpr int kBarWidth = 20;

// The line a terminal shows while the phase runs:
//   "kplan run: verifying weights [#####     ] 0.92/1.80 GiB 1.3 GiB/s ETA 0.7 s"
// Without a total the bar is left out ("kplan synth: writing d 12.3 MiB 40 MiB/s").
inline std::string progress_line(const std::string& command, const std::string& what, uint64_t done, uint64_t total,
                                 const ProgressUnit& unit, double elapsed) {
  std::string line = command + ": " + what + " ";
  if (total > 0) line += render_bar(done, total, kBarWidth) + " ";
  line += format_amount(done, total, unit);
  const std::string rate = format_rate(done, elapsed, unit);
  if (!rate.empty()) line += " " + rate;
  const std::string eta = format_eta(done, total, elapsed);
  if (!eta.empty() && done < total) line += " " + eta;
  return line;
}

// The line after the fact (a finished phase): "kplan run: verifying weights: 1.80 GiB in 1.4 s
// (1.3 GiB/s)"; a phase that counted nothing: "kplan run: loading the model: 1.4 s".
inline std::string summary_line(const std::string& command, const std::string& what, uint64_t done,
                                const ProgressUnit& unit, double elapsed) {
  std::string line = command + ": " + what + ": ";
  if (done == 0) return line + format_duration(elapsed);
  line += format_amount(done, 0, unit) + " in " + format_duration(elapsed);
  const std::string rate = format_rate(done, elapsed, unit);
  if (!rate.empty()) line += " (" + rate + ")";
  return line;
}

// A line cut to fit a terminal `columns` wide (one column spare, so the cursor never wraps and
// \r keeps redrawing the same row); columns <= 0: unknown, left whole.
inline std::string fit_width(const std::string& line, int columns) {
  if (columns <= 1 || static_cast<int>(line.size()) < columns) return line;
  return line.substr(0, static_cast<size_t>(columns - 1));
}

// At most one redraw per `interval` seconds (~10 a second): should_draw(now) says whether an
// update at time `now` (seconds on any steady clock) is drawn, and if so counts it as drawn. The
// first update is drawn once `interval` has passed since `start`, so a phase that ends sooner
// draws no bar at all; a final update (finished) is always drawn.
class RedrawThrottle {
 public:
  explicit RedrawThrottle(double start, double interval = 0.1) : last_(start), interval_(interval) {}
  bool should_draw(double now, bool finished = false) {
    if (!finished && now - last_ < interval_) return false;
    last_ = now;
    ++draws_;
    return true;
  }
  int draws() const { return draws_; }

 private:
  double last_;
  double interval_;
  int draws_ = 0;
};

}  // namespace progress
}  // namespace kplan::cli
