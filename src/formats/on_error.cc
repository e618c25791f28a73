#include "dataecho/formats/on_error.h"

#include "dataecho/core/error.h"

namespace dataecho {

OnError parse_on_error(const std::string& name) {
  if (name == "fail") return OnError::kFail;
  if (name == "skip") return OnError::kSkip;
  if (name == "echo") return OnError::kEcho;
  throw_error(ErrorCode::kInvalidArgument, "on_error",
              "expected \"fail\", \"skip\" or \"echo\", got \"" + name + "\"");
}

const char* on_error_name(OnError policy) {
  switch (policy) {
    case OnError::kFail:
      return "fail";
    case OnError::kSkip:
      return "skip";
    case OnError::kEcho:
      return "echo";
  }
  return "?";
}

}  // namespace dataecho
