// The trainer's progress line on standard error: \r-updated in place on a terminal,
// plain lines every few seconds otherwise (a log file stays readable). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dataecho::train {

struct ProgressInfo {
  int64_t step = 0;
  int64_t fresh = 0;
  int64_t echoed = 0;
  double train_seconds = 0;
  double examples_per_s = 0;
  double loss = 0;
  std::optional<double> accuracy;  // of the last evaluation
  double eta_seconds = -1;         // < 0: unknown
};

class ProgressLine {
 public:
  // mode: "auto", "tty", "lines" or "off"; interval: seconds between plain lines.
  ProgressLine(const std::string& mode, double interval_seconds);
  ~ProgressLine();
  // Prints when due (force: now, as after an evaluation).
  void update(const ProgressInfo& info, bool force = false);
  // A line about other work (the snapshots evaluated after training), under the same
  // rules: in place on a terminal, else at most every interval unless forced.
  void status(const std::string& text, bool force = false);
  // Ends a \r line with a newline so that later output starts on a clean line.
  void finish();

 private:
  void emit(const std::string& line);
  bool tty_ = false;
  bool off_ = false;
  double interval_ = 10;
  int64_t last_ns_ = 0;
  bool open_line_ = false;
  size_t last_width_ = 0;
  bool printed_any_ = false;
  int64_t last_step_ = -1;
  std::string last_acc_;
};

std::string format_duration(double seconds);  // "1:02:03", "4:05", "7s"

}  // namespace dataecho::train
