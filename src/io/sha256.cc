#include "io/sha256.h"

#include <cctype>
#include <cstring>

#include "dataecho/core/error.h"

namespace dataecho {
namespace {

constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::compress(const unsigned char* block) {
  std::array<uint32_t, 64> w;
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
           (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  auto [a, b, c, d, e, f, g, h] = h_;
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const std::array<uint32_t, 8> add = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) h_[i] += add[i];
}

void Sha256::update(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_bytes_ += n;
  if (block_used_ > 0) {
    const size_t take = std::min(n, block_.size() - block_used_);
    std::memcpy(block_.data() + block_used_, p, take);
    block_used_ += take;
    p += take;
    n -= take;
    if (block_used_ < block_.size()) return;
    compress(block_.data());
    block_used_ = 0;
  }
  for (; n >= 64; p += 64, n -= 64) compress(p);
  std::memcpy(block_.data(), p, n);
  block_used_ = n;
}

std::string Sha256::hex_digest() {
  const uint64_t bits = total_bytes_ * 8;
  const unsigned char one = 0x80;
  update(&one, 1);
  const unsigned char zero = 0;
  while (block_used_ != 56) update(&zero, 1);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  update(length, 8);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h_) {
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 0xf];
  }
  return out;
}

std::optional<std::string> url_sha256(const std::string& url) {
  const size_t hash = url.find('#');
  if (hash == std::string::npos) return std::nullopt;
  const std::string key = "sha256=";
  if (url.compare(hash + 1, key.size(), key) != 0) return std::nullopt;
  std::string hex = url.substr(hash + 1 + key.size());
  bool ok = hex.size() == 64;
  for (char& c : hex) {
    ok = ok && std::isxdigit(static_cast<unsigned char>(c));
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument, "uri",
                "a #sha256= fragment needs 64 hex digits, got \"" + url.substr(hash + 1) + "\"",
                url);
  return hex;
}

}  // namespace dataecho
