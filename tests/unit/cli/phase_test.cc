// A phase on stderr (tools/kplan/phase.h), in-process with stderr pointed at a pseudo-terminal,
// a file, or silenced: on a terminal the announcement, then the bar redrawn in place with \r from
// the counters (not before 0.1 s, at most ~10 times a second), then the finished bar with the
// phase's time and a newline; off a terminal nothing for a quick phase and the amount, time and
// rate after the fact for one over a second; --quiet nothing at all. Bounded: about 1.5 s of sleeps.
#include "tools/kplan/phase.h"

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace kplan::cli {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Points stderr (fd 2) at `fd` while alive.
class StderrTo {
 public:
  explicit StderrTo(int fd) : saved_(::dup(2)) {
    std::fflush(stderr);
    ::dup2(fd, 2);
  }
  ~StderrTo() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
  }

 private:
  int saved_;
};

std::string drain(int fd) {
  std::string out;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void pause_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Phase, ATerminalSeesTheBarRedrawnInPlace) {
  int master = -1, slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) GTEST_SKIP() << "no pseudo-terminal";
  std::string tty;
  {
    StderrTo redirect(slave);
    Phase phase("kplan test", "hashing", false);
    phase.progress(0, 100 * kMiB);
    for (int i = 1; i <= 50; ++i) phase.progress(i * kMiB, 100 * kMiB);  // all within 0.1 s: not drawn
    pause_s(0.15);
    phase.progress(50 * kMiB, 100 * kMiB);  // drawn
    phase.progress(51 * kMiB, 100 * kMiB);  // too soon after: not drawn
    pause_s(0.15);
    phase.progress(100 * kMiB, 100 * kMiB);
    EXPECT_GT(phase.done(), 0.29);
  }
  tty = drain(master);
  ::close(master);
  ::close(slave);
  EXPECT_EQ(tty.rfind("kplan test: hashing ...", 0), 0u) << tty;
  EXPECT_NE(tty.find("\rkplan test: hashing [##########          ] 50.0/100 MiB "), std::string::npos) << tty;
  EXPECT_NE(tty.find(" ETA "), std::string::npos) << tty;
  EXPECT_EQ(tty.find("51.0/100"), std::string::npos) << "a redraw sooner than 0.1 s after the last: " << tty;
  EXPECT_EQ(tty.find("[#                   ]"), std::string::npos) << "drawn before 0.1 s: " << tty;
  // Two redraws and the finished line: the full bar with the rate and the phase's time.
  EXPECT_EQ(count_of(tty, "\r"), 3u + count_of(tty, "\r\n")) << tty;  // the pty turns \n into \r\n
  const size_t last = tty.rfind("\rkplan test: hashing [####################] 100/100 MiB ");
  ASSERT_NE(last, std::string::npos) << tty;
  EXPECT_NE(tty.find(" MiB/s ", last), std::string::npos) << tty.substr(last);
  EXPECT_NE(tty.find(" s\033[K\r\n", last), std::string::npos) << tty.substr(last);
}

TEST(Phase, ElsewhereOneLineAfterTheFactOnlyPastASecond) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    StderrTo redirect(::fileno(f));
    Phase quick("kplan test", "quick", false);
    quick.progress(5, 10);
    quick.done();
    Phase slow("kplan test", "slow", false, ProgressUnit::count("files"));
    slow.progress(0, 4);
    slow.progress(4, 4);
    pause_s(1.05);
    slow.done();
  }
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  std::fclose(f);
  EXPECT_EQ(text.find("quick"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.rfind("kplan test: slow: 4 files in 1.", 0), 0u) << text;
  EXPECT_NE(text.find(" s ("), std::string::npos) << text;
  EXPECT_NE(text.find(" files/s)\n"), std::string::npos) << text;
}

TEST(Phase, QuietSaysNothingAnywhere) {
  int master = -1, slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) GTEST_SKIP() << "no pseudo-terminal";
  {
    StderrTo redirect(slave);
    Phase phase("kplan test", "hashing", true);
    pause_s(0.15);
    phase.progress(1, 2);
    phase.done();
  }
  EXPECT_EQ(drain(master), "");
  ::close(master);
  ::close(slave);
}

}  // namespace
}  // namespace kplan::cli
