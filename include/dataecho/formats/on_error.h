// What a file source does with a record it cannot read (bad CRC, truncated record,
// invalid tf.Example, missing feature, tar entry without its fields).
#pragma once

#include <string>

namespace dataecho {

enum class OnError {
  kFail,  // throw a dataecho::Error naming file, record, byte offset and reason (default)
  kSkip,  // drop the record; stats counter "skipped"; one summary line per file on stderr
  kEcho,  // emit the last good example again with its echo index raised by 1; counter
          // "repaired". Before any good example of the file, the record is skipped.
};

// "fail", "skip", "echo"; throws kInvalidArgument for anything else.
OnError parse_on_error(const std::string& name);
const char* on_error_name(OnError policy);

}  // namespace dataecho
