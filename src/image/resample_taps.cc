// The resampler's planning (see resample.h): the taps tables that say which source
// pixels each output reads and with what weights, cached per thread. The kernels that
// apply them are in resize.cc. Floating-point contraction is off for this file too
// (CMakeLists.txt): the weights are the same bits on every machine.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "image/resample.h"

namespace dataecho {
namespace detail {
namespace {
// floor() for values well inside the int range. The x86-64 baseline has no rounding
// instruction, so std::floor is a library call, and make_taps runs twice per image.
inline int floor_int(double v) {
  const int i = static_cast<int>(v);
  return i - (v < i);
}

// The taps for the source interval [0, in_len), in order: make_taps shifts and
// reverses them. Computing them relative to the interval keeps them independent of
// where it lies, so they can be cached.
Taps compute_taps(int in_len, int out_full, int win_lo, int win_len, bool antialias) {
  const double scale = static_cast<double>(in_len) / out_full;
  const double support = antialias && scale > 1.0 ? scale : 1.0;
  const double inv_support = 1.0 / support;
  const int in_lo = 0, in_hi = in_len;
  // Flat per-sample storage (no allocation per sample: this runs for every image).
  const int kmax = static_cast<int>(std::ceil(2 * support)) + 2;
  thread_local std::vector<double> wbuf;
  thread_local std::vector<int> first, count;
  thread_local std::vector<double> norm;
  if (wbuf.size() < static_cast<size_t>(win_len) * kmax)
    wbuf.resize(static_cast<size_t>(win_len) * kmax);
  first.resize(win_len);
  count.resize(win_len);
  norm.resize(win_len);
  int k = 1;
  for (int i = 0; i < win_len; ++i) {
    const double center = in_lo + (win_lo + i + 0.5) * scale;
    const int xmin = std::max(floor_int(center - support + 0.5), in_lo);
    const int xmax = std::min(floor_int(center + support + 0.5), in_hi);
    double* w = wbuf.data() + static_cast<size_t>(i) * kmax;
    // Zero-weight taps at either end are dropped (an exact hit on a pixel centre is one tap).
    int n = 0, b = -1;
    double total = 0;
    for (int x = xmin; x < xmax; ++x) {
      const double d = std::abs((x + 0.5 - center) * inv_support);
      const double v = d < 1.0 ? 1.0 - d : 0.0;
      if (v <= 1e-9 && b < 0) continue;
      if (b < 0) b = x;
      w[n++] = v;
      total += v;
    }
    while (n > 0 && w[n - 1] <= 1e-9) --n;
    if (n == 0) {  // cannot happen for in_len >= 1, but never divide by zero
      b = std::clamp(static_cast<int>(center), in_lo, in_hi - 1);
      w[0] = total = 1.0;
      n = 1;
    }
    // Normalized as they are copied out below: rescaling them here, right after the
    // scalar stores, costs a store-forwarding stall per sample.
    norm[i] = 1.0 / total;
    first[i] = b;
    count[i] = n;
    k = std::max(k, n);
  }
  Taps t;
  t.count = win_len;
  t.k = k;
  t.start.resize(win_len);
  t.weight.assign(static_cast<size_t>(win_len) * k, 0.0f);
  t.lo = in_hi;
  t.hi = in_lo;
  for (int i = 0; i < win_len; ++i) {
    int s = first[i];
    const int shift = std::max(0, s + k - in_hi);  // pad at the front, staying inside the source
    s -= shift;
    t.start[i] = s;
    for (int j = 0; j < count[i]; ++j)
      t.weight[static_cast<size_t>(i) * k + shift + j] =
          static_cast<float>(wbuf[static_cast<size_t>(i) * kmax + j] * norm[i]);
    t.lo = std::min(t.lo, s);
    t.hi = std::max(t.hi, s + k);
  }
  return t;
}

}  // namespace

void make_taps(Taps& t, int in_lo, int in_len, int out_full, int win_lo, int win_len,
               bool antialias, bool reverse) {
  // A random resized crop asks for a few hundred distinct source lengths, twice per
  // image; computing taps costs microseconds, copying cached ones a fraction of that.
  // The cache is per thread, direct-mapped and bounded: 256 entries of at most 512
  // outputs (a few KB each for a 224-pixel output: under 1 MB; 2 MB at most).
  struct Entry {
    uint64_t key = ~uint64_t{0};
    Taps taps;
  };
  thread_local std::vector<Entry> cache;
  const bool cacheable = in_len < (1 << 16) && out_full < (1 << 16) && win_lo >= 0 &&
                         win_lo < (1 << 15) && win_len <= 512;
  Taps computed;
  const Taps* rel = &computed;
  if (cacheable) {
    const uint64_t key = static_cast<uint64_t>(in_len) | static_cast<uint64_t>(out_full) << 16 |
                         static_cast<uint64_t>(win_lo) << 32 |
                         static_cast<uint64_t>(win_len) << 47 |
                         static_cast<uint64_t>(antialias) << 63;
    if (cache.empty()) cache.resize(256);
    Entry& e = cache[(key * 0x9E3779B97F4A7C15ull) >> 56];
    if (e.key != key) {
      e.taps = compute_taps(in_len, out_full, win_lo, win_len, antialias);
      e.key = key;
    }
    rel = &e.taps;
  } else {
    computed = compute_taps(in_len, out_full, win_lo, win_len, antialias);
  }
  t.count = rel->count;
  t.k = rel->k;
  t.lo = rel->lo + in_lo;
  t.hi = rel->hi + in_lo;
  t.start.resize(t.count);
  if (!reverse) {
    for (int i = 0; i < t.count; ++i) t.start[i] = rel->start[i] + in_lo;
    t.weight.assign(rel->weight.begin(), rel->weight.end());
    return;
  }
  t.weight.resize(rel->weight.size());
  for (int i = 0; i < t.count; ++i) {
    const int o = t.count - 1 - i;
    t.start[o] = rel->start[i] + in_lo;
    std::copy_n(rel->weight.begin() + static_cast<ptrdiff_t>(i) * t.k, t.k,
                t.weight.begin() + static_cast<ptrdiff_t>(o) * t.k);
  }
}

void identity_taps(Taps& t, int lo, int len, bool reverse) {
  t.count = len;
  t.k = 1;
  t.start.resize(len);
  t.weight.assign(len, 1.0f);
  for (int i = 0; i < len; ++i) t.start[i] = reverse ? lo + len - 1 - i : lo + i;
  t.lo = lo;
  t.hi = lo + len;
}

}  // namespace detail
}  // namespace dataecho
