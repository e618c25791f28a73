// SHA-256 (FIPS 180-4), for the checksums a manifest gives its shards
// (`https://host/shard.tar#sha256=<64 hex digits>`, the fragment form of PEP 503).
// Internal to src/io.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace dataecho {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex_digest();  // ends the hash: call once

 private:
  void compress(const unsigned char* block);
  std::array<uint32_t, 8> h_;
  std::array<unsigned char, 64> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

// The lower-case hex digest a URL's `#sha256=` fragment asks for; nullopt when it has
// none. A fragment that starts so but is not 64 hex digits is an error naming the URL.
std::optional<std::string> url_sha256(const std::string& url);

}  // namespace dataecho
