#include "dataecho/formats/memory_stream.h"

#include <algorithm>
#include <cstring>

namespace dataecho {
namespace {

class MemoryStream : public ByteStream {
 public:
  MemoryStream(std::string bytes, std::string uri)
      : bytes_(std::move(bytes)), uri_(std::move(uri)) {}
  size_t read(void* dst, size_t n) override {
    size_t k = std::min(n, bytes_.size() - std::min<size_t>(pos_, bytes_.size()));
    if (k) std::memcpy(dst, bytes_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  uint64_t position() const override { return pos_; }
  void seek(uint64_t offset) override {
    pos_ = static_cast<size_t>(std::min<uint64_t>(offset, bytes_.size()));
  }
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  const std::string& uri() const override { return uri_; }

 private:
  std::string bytes_, uri_;
  size_t pos_ = 0;
};

}  // namespace

std::unique_ptr<ByteStream> make_memory_stream(std::string bytes, std::string uri) {
  return std::make_unique<MemoryStream>(std::move(bytes), std::move(uri));
}

}  // namespace dataecho
