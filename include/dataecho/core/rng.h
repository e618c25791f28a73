// Rng: a small, fast, seeded generator (xoshiro256**) whose streams are the same on
// every platform and compiler, unlike std:: distributions. Not thread-safe: one per user.
#pragma once

#include <array>
#include <cstdint>

namespace dataecho {

// SplitMix64 finalizer: a strong 64-bit mix, used to derive independent seeds.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
constexpr uint64_t mix_seed(uint64_t a, uint64_t b) {
  return mix64(a ^ mix64(b + 0x632BE59BD9B4E019ull));
}

// The seed of the random stream of one copy of one element: what every random map
// function (augmentation) uses, so each echoed copy gets its own, reproducible stream
// whatever thread or timing processes it.
constexpr uint64_t element_seed(uint64_t node_seed, int64_t id, int32_t echo) {
  return mix_seed(mix_seed(node_seed, static_cast<uint64_t>(id)), static_cast<uint64_t>(echo));
}

// The seed of the order draws (shuffle, fractional echo) of lane `lane` of an elastic
// pipeline (ops/elastic.h), so that its lanes do not draw alike; `seed` itself outside
// one (lane < 0), so that a pipeline without lanes draws as it always has.
inline constexpr uint64_t kLaneSalt = 0x4C414E45'53414C54ull;
constexpr uint64_t lane_seed(uint64_t seed, int64_t lane) {
  return lane < 0 ? seed : mix_seed(seed, kLaneSalt ^ static_cast<uint64_t>(lane));
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) {
      x += 0x9E3779B97F4A7C15ull;
      s = mix64(x);
    }
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n), n > 0 (Lemire's nearly divisionless method).
  uint64_t uniform(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
  bool bernoulli(double p) { return uniform01() < p; }

  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

}  // namespace dataecho
