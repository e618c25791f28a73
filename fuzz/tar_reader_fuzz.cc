// libFuzzer target: the WebDataset tar reader (libarchive over a ByteStream) on
// arbitrary bytes, including resuming at the offsets it reports.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dataecho/formats/memory_stream.h"
#include "dataecho/formats/tar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dataecho;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  TarReader r(make_memory_stream(bytes, "fuzz"));
  TarSample s;
  int64_t resume = -1;
  for (int i = 0; i < 10000; ++i) {
    auto st = r.next(&s);
    if (st == TarReader::Status::kEnd) break;
    if (st == TarReader::Status::kCorrupt) {
      r.bytes_from(r.corrupt_offset());
      break;
    }
    if (i == 0) resume = r.resume_offset();
  }
  if (resume > 0 && static_cast<uint64_t>(resume) <= size) {
    TarReader again(make_memory_stream(bytes, "fuzz"));
    again.seek_to(static_cast<uint64_t>(resume));
    for (int i = 0; i < 10000; ++i) {
      auto st = again.next(&s);
      if (st == TarReader::Status::kEnd || st == TarReader::Status::kCorrupt) break;
    }
  }
  return 0;
}
