// The separable resampling kernel (see resample.h) and resize().
//
// Work per output image: a horizontal pass over each source row the vertical filter
// needs (computed once, kept in a ring of k rows), then a vertical pass per output row
// that also applies the normalization and writes the output layout. Both passes run on
// float rows laid out channel-planar, so the vertical pass and the CHW store are plain
// vector loops.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "image/resample.h"

namespace dataecho {
namespace detail {
namespace {

using v4sf = float __attribute__((vector_size(16)));

inline v4sf load4(const float* p) {
  v4sf v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store4(float* p, v4sf v) { std::memcpy(p, &v, sizeof(v)); }

Taps finish(int count, std::vector<int> first, std::vector<std::vector<float>> w, int in_lo,
            int in_hi, bool reverse) {
  Taps t;
  t.count = count;
  for (const auto& ws : w) t.k = std::max(t.k, static_cast<int>(ws.size()));
  t.start.resize(count);
  t.weight.assign(static_cast<size_t>(count) * t.k, 0.0f);
  t.lo = in_hi;
  t.hi = in_lo;
  for (int i = 0; i < count; ++i) {
    const int o = reverse ? count - 1 - i : i;
    int s = first[i];
    int shift = 0;
    if (s + t.k > in_hi) {  // pad at the front instead, staying inside the source
      shift = s + t.k - in_hi;
      s -= shift;
    }
    t.start[o] = s;
    for (size_t j = 0; j < w[i].size(); ++j)
      t.weight[static_cast<size_t>(o) * t.k + shift + j] = w[i][j];
    t.lo = std::min(t.lo, s);
    t.hi = std::max(t.hi, s + t.k);
  }
  return t;
}

}  // namespace

Taps make_taps(int in_lo, int in_len, int out_full, int win_lo, int win_len, bool antialias,
               bool reverse) {
  const double scale = static_cast<double>(in_len) / out_full;
  const double support = antialias && scale > 1.0 ? scale : 1.0;
  const int in_hi = in_lo + in_len;
  std::vector<int> first(win_len);
  std::vector<std::vector<float>> w(win_len);
  std::vector<double> tmp;
  for (int i = 0; i < win_len; ++i) {
    const double center = in_lo + (win_lo + i + 0.5) * scale;
    int xmin = std::max(static_cast<int>(std::floor(center - support + 0.5)), in_lo);
    int xmax = std::min(static_cast<int>(std::floor(center + support + 0.5)), in_hi);
    tmp.clear();
    double total = 0;
    for (int x = xmin; x < xmax; ++x) {
      double d = std::abs((x + 0.5 - center) / support);
      double v = d < 1.0 ? 1.0 - d : 0.0;
      tmp.push_back(v);
      total += v;
    }
    // Drop zero-weight taps at both ends (an exact hit on a pixel centre is one tap).
    size_t b = 0, e = tmp.size();
    while (b < e && tmp[b] <= 1e-9) ++b;
    while (e > b && tmp[e - 1] <= 1e-9) --e;
    if (b == e) {  // cannot happen for in_len >= 1, but never divide by zero
      first[i] = std::clamp(static_cast<int>(center), in_lo, in_hi - 1);
      w[i] = {1.0f};
      continue;
    }
    first[i] = xmin + static_cast<int>(b);
    for (size_t j = b; j < e; ++j) w[i].push_back(static_cast<float>(tmp[j] / total));
  }
  return finish(win_len, std::move(first), std::move(w), in_lo, in_hi, reverse);
}

Taps identity_taps(int lo, int len, bool reverse) {
  Taps t;
  t.count = len;
  t.k = 1;
  t.start.resize(len);
  t.weight.assign(len, 1.0f);
  for (int i = 0; i < len; ++i) t.start[i] = reverse ? lo + len - 1 - i : lo + i;
  t.lo = lo;
  t.hi = lo + len;
  return t;
}

namespace {

// Horizontal pass of one source row into channel-planar floats: out[c * n + o].
template <int C, int K>
void hpass(const uint8_t* row, int channels, const int* offset, const float* weight, int n, int k,
           float* out) {
  const int ch = C ? C : channels;
  const int kk = K ? K : k;
  for (int o = 0; o < n; ++o) {
    const uint8_t* p = row + offset[o];
    const float* w = weight + static_cast<size_t>(o) * kk;
    if constexpr (C == 3 && K == 2) {
      const float w0 = w[0], w1 = w[1];
      out[o] = p[0] * w0 + p[3] * w1;
      out[n + o] = p[1] * w0 + p[4] * w1;
      out[2 * n + o] = p[2] * w0 + p[5] * w1;
    } else {
      for (int c = 0; c < ch; ++c) {
        float acc = 0;
        for (int j = 0; j < kk; ++j) acc += p[j * ch + c] * w[j];
        out[c * n + o] = acc;
      }
    }
  }
}

using HPass = void (*)(const uint8_t*, int, const int*, const float*, int, int, float*);

template <int C>
HPass pick_k(int k) {
  switch (k) {
    case 1:
      return hpass<C, 1>;
    case 2:
      return hpass<C, 2>;
    case 3:
      return hpass<C, 3>;
    case 4:
      return hpass<C, 4>;
    default:
      return hpass<C, 0>;
  }
}

HPass pick_hpass(int channels, int k) {
  switch (channels) {
    case 1:
      return pick_k<1>(k);
    case 3:
      return pick_k<3>(k);
    default:
      return pick_k<0>(k);
  }
}

// acc[i] = sum_j w[j] * rows[j][i] for i < n.
void vpass(const float* const* rows, const float* w, int k, int n, float* acc) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    v4sf a = load4(rows[0] + i) * w[0];
    for (int j = 1; j < k; ++j) a += load4(rows[j] + i) * w[j];
    store4(acc + i, a);
  }
  for (; i < n; ++i) {
    float a = rows[0][i] * w[0];
    for (int j = 1; j < k; ++j) a += rows[j][i] * w[j];
    acc[i] = a;
  }
}

void scale_bias(const float* in, int n, float s, float b, float* out) {
  int i = 0;
  for (; i + 4 <= n; i += 4) store4(out + i, load4(in + i) * s + b);
  for (; i < n; ++i) out[i] = in[i] * s + b;
}

inline uint8_t to_u8(float v) {
  v += 0.5f;
  return static_cast<uint8_t>(v <= 0.0f ? 0.0f : (v >= 255.0f ? 255.0f : v));
}

struct Scratch {
  std::vector<float> ring;  // k rows of C * width floats
  std::vector<float> acc;
  std::vector<int> offset;
  std::vector<int> ring_row;
};

}  // namespace

Tensor resample(const ImageView& src, int origin_y, int origin_x, const Taps& ty, const Taps& tx,
                const float* scale, const float* bias) {
  thread_local Scratch s;
  const int C = src.channels, OH = ty.count, OW = tx.count;
  const int row_len = C * OW;
  s.offset.resize(OW);
  for (int o = 0; o < OW; ++o) s.offset[o] = (tx.start[o] - origin_x) * C;
  s.ring.resize(static_cast<size_t>(ty.k) * row_len);
  s.ring_row.assign(ty.k, -1);
  s.acc.resize(row_len);
  const HPass hp = pick_hpass(C, tx.k);
  const bool to_float = scale != nullptr;
  const float* rows[64];
  std::vector<const float*> many_rows;
  const float** rp = rows;
  if (ty.k > 64) {
    many_rows.resize(ty.k);
    rp = many_rows.data();
  }

  auto fill = [&](std::byte* out_bytes) {
    for (int oy = 0; oy < OH; ++oy) {
      const int y0 = ty.start[oy];
      for (int j = 0; j < ty.k; ++j) {
        const int y = y0 + j;
        const int slot = y % ty.k;
        float* dst = s.ring.data() + static_cast<size_t>(slot) * row_len;
        if (s.ring_row[slot] != y) {
          hp(src.data + static_cast<int64_t>(y - origin_y) * src.stride, C, s.offset.data(),
             tx.weight.data(), OW, tx.k, dst);
          s.ring_row[slot] = y;
        }
        rp[j] = dst;
      }
      const float* w = ty.weight.data() + static_cast<size_t>(oy) * ty.k;
      if (to_float) {
        auto* out = reinterpret_cast<float*>(out_bytes);
        const float* acc = rp[0];
        if (!(ty.k == 1 && w[0] == 1.0f)) {
          vpass(rp, w, ty.k, row_len, s.acc.data());
          acc = s.acc.data();
        }
        for (int c = 0; c < C; ++c)
          scale_bias(acc + c * OW, OW, scale[c], bias[c],
                     out + (static_cast<size_t>(c) * OH + oy) * OW);
      } else {
        vpass(rp, w, ty.k, row_len, s.acc.data());
        auto* out = reinterpret_cast<uint8_t*>(out_bytes) + static_cast<size_t>(oy) * row_len;
        for (int c = 0; c < C; ++c)
          for (int o = 0; o < OW; ++o) out[o * C + c] = to_u8(s.acc[c * OW + o]);
      }
    }
  };
  if (to_float) return Tensor::make(DType::kFloat32, {C, OH, OW}, fill);
  return Tensor::make(DType::kUInt8, {OH, OW, C}, fill);
}

}  // namespace detail

Tensor resize(const Tensor& hwc, int height, int width, bool antialias) {
  ImageView v = ImageView::of(hwc, "resize");
  if (height <= 0 || width <= 0)
    throw_error(
        ErrorCode::kInvalidArgument, "resize",
        "size must be positive, got " + std::to_string(height) + "x" + std::to_string(width));
  detail::Taps ty = detail::make_taps(0, v.height, height, 0, height, antialias, false);
  detail::Taps tx = detail::make_taps(0, v.width, width, 0, width, antialias, false);
  return detail::resample(v, 0, 0, ty, tx, nullptr, nullptr);
}

}  // namespace dataecho
