// What both transports share: status codes, CallError, running a handler.
#include "service/transport.h"

namespace dataecho::service {

std::string call_code_name(CallCode code) {
  switch (code) {
    case CallCode::kOk:
      return "OK";
    case CallCode::kCancelled:
      return "CANCELLED";
    case CallCode::kUnknown:
      return "UNKNOWN";
    case CallCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case CallCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case CallCode::kNotFound:
      return "NOT_FOUND";
    case CallCode::kInternal:
      return "INTERNAL";
    case CallCode::kUnavailable:
      return "UNAVAILABLE";
    case CallCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "code " + std::to_string(static_cast<int>(code));
}

namespace {

ErrorCode error_code_of(CallCode code) {
  switch (code) {
    case CallCode::kCancelled:
      return ErrorCode::kCancelled;
    case CallCode::kInvalidArgument:
    case CallCode::kUnauthenticated:
      return ErrorCode::kInvalidArgument;
    case CallCode::kNotFound:
      return ErrorCode::kNotFound;
    case CallCode::kInternal:
      return ErrorCode::kInternal;
    default:
      return ErrorCode::kIo;
  }
}

}  // namespace

CallError::CallError(CallCode code, const std::string& detail, const std::string& method,
                     const std::string& target)
    : Error(error_code_of(code), "service", call_code_name(code) + ": " + detail,
            method.empty() ? target : method + (target.empty() ? "" : " at " + target)),
      call_code_(code),
      detail_(detail) {}

CallCode run_handler(const std::function<void()>& handler, std::string& message) {
  try {
    handler();
    return CallCode::kOk;
  } catch (const CallError& e) {
    message = e.detail();
    return e.call_code();
  } catch (const std::exception& e) {
    message = e.what();
    return CallCode::kUnknown;
  }
}

}  // namespace dataecho::service
