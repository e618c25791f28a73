// Errors a user can act on. Thread-safe: immutable after construction.
#pragma once

#include <stdexcept>
#include <string>

namespace dataecho {

enum class ErrorCode {
  kInvalidArgument,  // a wrong spec, option or call
  kDataLoss,         // corrupt or truncated input data
  kNotFound,         // a missing file, field or URL
  kIo,               // the operating system or network failed
  kCancelled,        // the pipeline was destroyed or cancelled
  kOutOfRange,       // asked for more than there is
  kInternal,         // a bug in dataecho
};

const char* error_code_name(ErrorCode code);

// One exception type for everything dataecho throws. `stage` names the pipeline
// node or component ("tfrecord", "3:map(decode_image)"), `input` the position in
// the data ("train-00003.tfrecord record 412 at byte 18234"), so that what()
// reads like: "tfrecord: bad data CRC (train-00003.tfrecord record 412 at byte 18234)".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string stage, std::string message, std::string input = "");

  ErrorCode code() const { return code_; }
  const std::string& stage() const { return stage_; }
  const std::string& message() const { return message_; }
  const std::string& input() const { return input_; }

  // A copy of this error attributed to an outer stage, keeping the inner one in the text:
  // used when an error crosses a node boundary (a map function's failure reaches the consumer).
  Error with_context(const std::string& stage, const std::string& input) const;

 private:
  ErrorCode code_;
  std::string stage_;
  std::string message_;
  std::string input_;
};

[[noreturn]] void throw_error(ErrorCode code, std::string stage, std::string message,
                              std::string input = "");

}  // namespace dataecho
