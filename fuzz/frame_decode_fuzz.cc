// libFuzzer target: the data service's frame decoding (src/service/frame.h) over arbitrary
// bytes. The first byte says where the rest is cut into received buffers (a transport may
// cut a frame anywhere); a frame is read or refused with an Error, never past its end.
// With DATAECHO_FUZZ_WRITE_SEEDS=DIR the target writes a seed frame there (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "service/frame.h"

namespace {

std::shared_ptr<const dataecho::Buffer> buffer_of(const uint8_t* data, size_t size) {
  auto b = dataecho::Buffer::allocate(size);
  if (size) std::memcpy(b->mutable_data(), data, size);
  return b;
}

void write_seed(const char* dir) {
  using namespace dataecho;
  Example e(7);
  e.set_echo(1);
  e.set("image",
        Tensor::make(DType::kUInt8, {8, 8, 3}, [](std::byte* p) { std::memset(p, 3, 192); }));
  e.set("label", Tensor::scalar<int64_t>(4));
  e.set("w", Tensor::make(DType::kFloat32, {2, 0}, [](std::byte*) {}));
  service::FrameWriter w({service::FrameKind::kElements, 1, 2, 3, 4});
  w.add(0, e);
  std::string bytes(1, '\x20');  // cut after byte 32
  for (const auto& b : w.finish())
    bytes.append(reinterpret_cast<const char*>(b->data()), b->size());
  std::ofstream(std::string(dir) + "/elements.fuzz", std::ios::binary) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("DATAECHO_FUZZ_WRITE_SEEDS")) {
    write_seed(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dataecho;
  if (size == 0) return 0;
  const size_t cut = std::min<size_t>(data[0], size - 1);
  const service::Frame frame{buffer_of(data + 1, cut), buffer_of(data + 1 + cut, size - 1 - cut)};
  service::FrameReader reader("fuzz");
  try {
    reader.read(frame);
  } catch (const Error&) {
    return 0;
  }
  const auto& c = reader.counters();
  if (c.view_bytes + c.copied_bytes > size) __builtin_trap();  // tensors past the input
  return 0;
}
