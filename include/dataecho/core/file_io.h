// Whole files written so that a reader, or a process killed at any moment, finds either
// the old file or the new one, never a part.
#pragma once

#include <string>
#include <string_view>

namespace dataecho {

// Writes `bytes` to a file beside `path` (PATH.tmp-PID), flushes it to the disk (fsync)
// and renames it over `path`. Any failure is an Error (kIo, the given `stage`) naming the
// file and the system's reason; the file beside it is removed and `path` is unchanged.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& stage);

}  // namespace dataecho
