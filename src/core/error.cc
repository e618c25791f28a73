#include "dataecho/core/error.h"

#include "dataecho/core/redact.h"

namespace dataecho {
namespace {

std::string format(const std::string& stage, const std::string& message, const std::string& input) {
  std::string s;
  if (!stage.empty()) s += stage + ": ";
  s += message;
  if (!input.empty()) s += " (" + input + ")";
  return s;
}

}  // namespace

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kDataLoss:
      return "data loss";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kIo:
      return "I/O error";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kOutOfRange:
      return "out of range";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

// Messages and inputs name files and URLs: a URL's credentials and query string never
// reach an error (redact.h).
Error::Error(ErrorCode code, std::string stage, std::string message, std::string input)
    : std::runtime_error(format(stage, redact_urls(message), redact_urls(input))),
      code_(code),
      stage_(std::move(stage)),
      message_(redact_urls(message)),
      input_(redact_urls(input)) {}

Error Error::with_context(const std::string& stage, const std::string& input) const {
  std::string msg = stage_.empty() ? message_ : stage_ + ": " + message_;
  if (!input_.empty()) msg += " (" + input_ + ")";
  return Error(code_, stage, msg, input);
}

void throw_error(ErrorCode code, std::string stage, std::string message, std::string input) {
  throw Error(code, std::move(stage), std::move(message), std::move(input));
}

}  // namespace dataecho
