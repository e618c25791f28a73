// libFuzzer target: TFRecord framing over arbitrary bytes, with and without CRC checks
// (without them the fuzzer reaches the length/truncation paths behind the CRCs).
#include <cstddef>
#include <cstdint>
#include <string>

#include "dataecho/formats/memory_stream.h"
#include "dataecho/formats/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dataecho;
  for (bool verify : {true, false}) {
    TfRecordReader::Options o;
    o.verify_crc = verify;
    TfRecordReader r(
        make_memory_stream(std::string(reinterpret_cast<const char*>(data), size), "fuzz"), o);
    std::shared_ptr<Buffer> rec;
    for (int i = 0; i < 100000; ++i) {
      auto st = r.next(&rec);
      if (st == TfRecordReader::Status::kEnd) break;
      if (st == TfRecordReader::Status::kOk && rec->size() > size)
        __builtin_trap();  // a record larger than its file
      if (st == TfRecordReader::Status::kBadLengthCrc || st == TfRecordReader::Status::kTruncated) {
        if (r.bytes_after_record_start() > size) __builtin_trap();
      }
    }
  }
  return 0;
}
