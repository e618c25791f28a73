#include "fashion_data.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>

namespace dataecho::testing {
namespace {

std::string gunzip_prefix(const std::string& path, size_t bytes) {
  std::string cmd = "gzip -dc '" + path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run gzip on " + path);
  std::string out(bytes, '\0');
  size_t got = std::fread(out.data(), 1, bytes, p);
  pclose(p);
  if (got != bytes) throw std::runtime_error("short read of " + path);
  return out;
}

}  // namespace

bool fashion_available() {
  return std::filesystem::exists(std::string(kFashionDir) + "/train-images-idx3-ubyte.gz") &&
         std::filesystem::exists(std::string(kFashionDir) + "/t10k-images-idx3-ubyte.gz");
}

std::shared_ptr<const std::vector<Example>> fashion(bool train, int64_t limit) {
  static std::map<std::pair<bool, int64_t>, std::shared_ptr<const std::vector<Example>>> cache;
  auto& slot = cache[{train, limit}];
  if (slot) return slot;
  std::string prefix = std::string(kFashionDir) + (train ? "/train" : "/t10k");
  std::string images =
      gunzip_prefix(prefix + "-images-idx3-ubyte.gz", 16 + static_cast<size_t>(limit) * 784);
  std::string labels =
      gunzip_prefix(prefix + "-labels-idx1-ubyte.gz", 8 + static_cast<size_t>(limit));
  auto out = std::make_shared<std::vector<Example>>();
  out->reserve(static_cast<size_t>(limit));
  for (int64_t i = 0; i < limit; ++i) {
    Example e(i);
    e.set("image",
          Tensor::from_data(DType::kUInt8, {28, 28, 1}, images.data() + 16 + i * 784, 784));
    e.set("label",
          Tensor::scalar<int64_t>(static_cast<uint8_t>(labels[8 + static_cast<size_t>(i)])));
    out->push_back(std::move(e));
  }
  slot = out;
  return slot;
}

}  // namespace dataecho::testing
