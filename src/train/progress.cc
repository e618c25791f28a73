#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "dataecho/core/clock.h"

namespace dataecho::train {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>((s / 60) % 60), static_cast<long long>(s % 60));
  }
  return buf;
}

ProgressLine::ProgressLine(const std::string& mode, double interval_seconds)
    : interval_(interval_seconds) {
  if (mode == "off") {
    off_ = true;
  } else if (mode == "tty") {
    tty_ = true;
  } else if (mode == "auto") {
    tty_ = isatty(STDERR_FILENO) == 1;
  }
  if (tty_) interval_ = 0.25;
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const ProgressInfo& p, bool force) {
  if (off_) return;
  char acc[32] = "-";
  if (p.accuracy) std::snprintf(acc, sizeof acc, "%.4f", *p.accuracy);
  // The same step with the same accuracy was printed already (the final report after an
  // evaluation that ended the run): do not print it twice.
  if (printed_any_ && p.step == last_step_ && std::string(acc) == last_acc_) return;
  int64_t now = now_ns();
  if (!force && last_ns_ != 0 && (now - last_ns_) < static_cast<int64_t>(interval_ * 1e9)) return;
  if (last_ns_ == 0 && !force && !tty_) {
    last_ns_ = now;  // the first plain line after one interval, not at step 1
    return;
  }
  last_ns_ = now;
  printed_any_ = true;
  last_step_ = p.step;
  last_acc_ = acc;
  char line[256];
  int n = std::snprintf(
      line, sizeof line,
      "step %lld | %.0f ex/s | fresh %lld echoed %lld | loss %.4f | acc %s | %s | ETA %s",
      static_cast<long long>(p.step), p.examples_per_s, static_cast<long long>(p.fresh),
      static_cast<long long>(p.echoed), p.loss, acc, format_duration(p.train_seconds).c_str(),
      p.eta_seconds < 0 ? "?" : format_duration(p.eta_seconds).c_str());
  emit(std::string(line, n > 0 ? static_cast<size_t>(n) : 0));
}

void ProgressLine::status(const std::string& text, bool force) {
  if (off_) return;
  const int64_t now = now_ns();
  if (!force && last_ns_ != 0 && (now - last_ns_) < static_cast<int64_t>(interval_ * 1e9)) return;
  last_ns_ = now;
  emit(text);
}

void ProgressLine::emit(const std::string& line) {
  if (tty_) {
    std::string pad(last_width_ > line.size() ? last_width_ - line.size() : 0, ' ');
    std::fprintf(stderr, "\r%s%s", line.c_str(), pad.c_str());
    open_line_ = true;
    last_width_ = line.size();
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void ProgressLine::finish() {
  if (open_line_) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
    open_line_ = false;
    last_width_ = 0;
  }
}

}  // namespace dataecho::train
