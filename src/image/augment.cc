// Crops, flip, normalize and the fused augmentation (see transforms.h). Every geometric
// step becomes a pair of Taps tables, so whatever the options, the pixels are read and
// written once (twice with pad_crop, which materializes its padded crop first).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "image/resample.h"

namespace dataecho {

ImageView ImageView::of(const Tensor& t, const char* what) {
  if (!t.defined() || t.dtype() != DType::kUInt8 || (t.rank() != 3 && t.rank() != 2))
    throw_error(
        ErrorCode::kInvalidArgument, what,
        std::string("expected a decoded uint8 [height, width, channels] image, got ") +
            (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape())
                         : std::string("an undefined tensor")));
  const Shape& s = t.shape();
  const int64_t c = t.rank() == 3 ? s[2] : 1;
  if (s[0] <= 0 || s[1] <= 0 || c <= 0 || s[0] > INT_MAX / 4 || s[1] * c > INT_MAX / 4)
    throw_error(ErrorCode::kInvalidArgument, what, "unusable image shape " + shape_to_string(s));
  ImageView v;
  v.data = reinterpret_cast<const uint8_t*>(t.raw_data());
  v.height = static_cast<int>(s[0]);
  v.width = static_cast<int>(s[1]);
  v.channels = static_cast<int>(c);
  v.stride = static_cast<int64_t>(v.width) * v.channels;
  return v;
}

Rect random_resized_crop_rect(int height, int width, const RandomResizedCropOptions& o, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(o.scale_min, o.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = static_cast<int>(rng.uniform(static_cast<uint64_t>(height - h + 1)));
      const int x = static_cast<int>(rng.uniform(static_cast<uint64_t>(width - w + 1)));
      return {y, x, h, w};
    }
  }
  // Fallback: the central crop with the ratio closest to the allowed range.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < o.ratio_min) {
    h = std::max(1, static_cast<int>(std::lround(w / o.ratio_min)));
  } else if (in_ratio > o.ratio_max) {
    w = std::max(1, static_cast<int>(std::lround(h * o.ratio_max)));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

namespace {

Tensor pad_crop_view(const ImageView& v, int pad, int dy, int dx) {
  const int H = v.height, W = v.width, C = v.channels;
  return Tensor::make(DType::kUInt8, {H, W, C}, [&](std::byte* out_bytes) {
    auto* out = reinterpret_cast<uint8_t*>(out_bytes);
    const int x_lo = std::clamp(pad - dx, 0, W), x_hi = std::clamp(W + pad - dx, x_lo, W);
    const size_t row = static_cast<size_t>(W) * C;
    for (int y = 0; y < H; ++y) {
      uint8_t* o = out + static_cast<size_t>(y) * row;
      const int sy = y + dy - pad;
      if (sy < 0 || sy >= H || x_lo == x_hi) {
        std::memset(o, 0, row);
        continue;
      }
      std::memset(o, 0, static_cast<size_t>(x_lo) * C);
      std::memcpy(o + static_cast<size_t>(x_lo) * C,
                  v.data + sy * v.stride + static_cast<int64_t>(x_lo + dx - pad) * C,
                  static_cast<size_t>(x_hi - x_lo) * C);
      std::memset(o + static_cast<size_t>(x_hi) * C, 0, static_cast<size_t>(W - x_hi) * C);
    }
  });
}

struct Geometry {
  detail::Taps ty, tx;
  bool identity = false;  // no crop, no resize, no flip
};

// The largest of 8, 4, 2 that the crop `r` is at least that many times the output
// (out_h x out_w) in both directions, else 1.
int decoder_denominator(const Rect& r, int out_h, int out_w) {
  for (int d : {8, 4, 2})
    if (r.height >= static_cast<int64_t>(d) * out_h && r.width >= static_cast<int64_t>(d) * out_w)
      return d;
  return 1;
}

// `lo` and `len` of the full image on the grid of the image scaled by 1/d (`size`
// pixels): edges rounded to the nearest scaled pixel, at least one pixel, inside it.
void to_scaled(int& lo, int& len, int d, int size) {
  const int a = static_cast<int>(std::lround(static_cast<double>(lo) / d));
  const int b = static_cast<int>(std::lround(static_cast<double>(lo + len) / d));
  lo = std::clamp(a, 0, size - 1);
  len = std::clamp(b, lo + 1, size) - lo;
}

// The geometry of one augmentation: valid until the thread's next call. With
// `decoder_scale` (decode_augment's option), a crop at least 2, 4 or 8 times the output
// is planned on the image scaled down by that factor, returned in *denom; the random
// draws are the same either way.
const Geometry& plan(int H, int W, const AugmentOptions& o, Rng& rng, bool decoder_scale = false,
                     int* denom = nullptr) {
  Rect r{0, 0, H, W};
  int out_h = H, out_w = W;
  if (o.random_resized_crop) {
    r = random_resized_crop_rect(H, W, *o.random_resized_crop, rng);
    out_h = o.random_resized_crop->height;
    out_w = o.random_resized_crop->width;
  } else if (o.resize_shorter > 0) {
    // torchvision's Resize(int): the shorter side becomes the size, the longer one
    // int(size * long / short).
    if (H <= W) {
      out_h = o.resize_shorter;
      out_w = std::max(1, static_cast<int>(static_cast<int64_t>(o.resize_shorter) * W / H));
    } else {
      out_w = o.resize_shorter;
      out_h = std::max(1, static_cast<int>(static_cast<int64_t>(o.resize_shorter) * H / W));
    }
  } else if (o.resize_height > 0) {
    out_h = o.resize_height;
    out_w = o.resize_width;
  }
  int wy = 0, wx = 0, wh = out_h, ww = out_w;
  if (o.center_crop_height > 0) {
    wh = o.center_crop_height;
    ww = o.center_crop_width;
    if (wh > out_h || ww > out_w)
      throw_error(ErrorCode::kInvalidArgument, "augment",
                  "center_crop " + std::to_string(ww) + "x" + std::to_string(wh) +
                      " is larger than the " + std::to_string(out_w) + "x" + std::to_string(out_h) +
                      " image");
    wy = static_cast<int>(std::lround((out_h - wh) / 2.0));
    wx = static_cast<int>(std::lround((out_w - ww) / 2.0));
  }
  const bool flip = o.flip_probability > 0 && rng.bernoulli(o.flip_probability);
  const int d = decoder_scale ? decoder_denominator(r, out_h, out_w) : 1;
  if (d > 1) {
    const int sh = (H + d - 1) / d, sw = (W + d - 1) / d;  // libjpeg's scaled size
    to_scaled(r.y, r.height, d, sh);
    to_scaled(r.x, r.width, d, sw);
  }
  if (denom) *denom = d;
  // Per thread, so that the tables' storage is reused image after image.
  thread_local Geometry g;
  const bool same_y = r.height == out_h, same_x = r.width == out_w;
  if (same_y)
    detail::identity_taps(g.ty, r.y + wy, wh, false);
  else
    detail::make_taps(g.ty, r.y, r.height, out_h, wy, wh, o.antialias, false);
  if (same_x)
    detail::identity_taps(g.tx, r.x + wx, ww, flip);
  else
    detail::make_taps(g.tx, r.x, r.width, out_w, wx, ww, o.antialias, flip);
  g.identity = d == 1 && !flip && same_y && same_x && wh == H && ww == W;
  return g;
}

// scale/bias per channel for the normalization; false when the output stays uint8.
bool normalization(const AugmentOptions& o, int channels, std::vector<float>& scale,
                   std::vector<float>& bias) {
  if (!o.normalize) return false;
  const auto& mean = o.normalize->mean;
  const auto& stdv = o.normalize->std;
  auto pick = [&](const std::vector<float>& v, int c, float fallback, const char* name) {
    if (v.empty()) return fallback;
    if (v.size() == 1) return v[0];
    if (static_cast<int>(v.size()) != channels)
      throw_error(ErrorCode::kInvalidArgument, "normalize",
                  std::string(name) + " has " + std::to_string(v.size()) +
                      " values but the image has " + std::to_string(channels) + " channels");
    return v[c];
  };
  scale.resize(channels);
  bias.resize(channels);
  for (int c = 0; c < channels; ++c) {
    const float m = pick(mean, c, 0.0f, "mean"), s = pick(stdv, c, 1.0f, "std");
    scale[c] = 1.0f / (255.0f * s);
    bias[c] = -m / s;
  }
  return true;
}

Tensor finish(const detail::RowSource& rows, const Geometry& g, const AugmentOptions& o) {
  thread_local std::vector<float> scale, bias;  // reused: no allocation per image
  if (normalization(o, rows.channels, scale, bias))
    return detail::resample(rows, g.ty, g.tx, scale.data(), bias.data());
  return detail::resample(rows, g.ty, g.tx, nullptr, nullptr);
}

// Rows of a JPEG region as resample asks for them, decoded kChunk rows at a time into
// a small per-thread buffer: the decoded pixels are resampled while still in L1, and
// the whole region is never held.
//
// Every row starts JpegRegionDecoder::kRowSkew bytes past a 64-byte boundary, so that
// libjpeg-turbo writes it through the cache (see there) and the resampler, which reads
// it a moment later, finds it in L1. Measured on AMD Zen 4 (image_bench, Fashion-MNIST
// 256x256 JPEGs): decode_augment went from 90-91% to 94-95% of the TurboJPEG loop with
// 1 thread; with every row aligned (the worst case) it was 81-90%. The buffer had been
// taken as it came, its rows 48 bytes apart for a region 16 pixels wide, so about
// every other row was written to memory.
class JpegRows {
 public:
  static constexpr int kChunk = 16;

  JpegRows(JpegRegionDecoder& dec, const DecodedRegion& r)
      : dec_(dec), r_(r), pitch_((r.stride + 63) / 64 * 64), first_(r.y), next_(r.y) {
    thread_local std::vector<uint8_t> buffer;
    constexpr size_t kSkew = JpegRegionDecoder::kRowSkew;
    const size_t need = static_cast<size_t>(pitch_) * kChunk + 64 + kSkew;
    if (buffer.size() < need) buffer.resize(need);
    const auto base = reinterpret_cast<uintptr_t>(buffer.data());
    buf_ = buffer.data() + ((64 - base % 64) % 64) + kSkew;
  }
  ~JpegRows() { dec_.finish(); }  // a region abandoned half way (an exception)

  detail::RowSource source() {
    detail::RowSource s;
    s.row = &JpegRows::row;
    s.ctx = this;
    s.channels = r_.channels;
    s.origin_x = r_.x;
    return s;
  }

 private:
  static const uint8_t* row(void* ctx, int y) {
    auto* self = static_cast<JpegRows*>(ctx);
    if (y < self->first_)
      throw_error(ErrorCode::kInternal, "decode_image",
                  "region row " + std::to_string(y) + " asked for after row " +
                      std::to_string(self->next_ - 1));
    while (y >= self->next_) {  // rows between are decoded and dropped
      const int n = self->dec_.read_rows(self->buf_, self->pitch_, kChunk);
      if (n == 0)
        throw_error(ErrorCode::kInternal, "decode_image",
                    "region row " + std::to_string(y) + " is past its end");
      self->first_ = self->next_;
      self->next_ += n;
    }
    return self->buf_ + static_cast<int64_t>(y - self->first_) * self->pitch_;
  }

  JpegRegionDecoder& dec_;
  DecodedRegion r_;
  int64_t pitch_;  // bytes from one row to the next: r_.stride rounded up to 64
  uint8_t* buf_ = nullptr;
  int first_ = 0;  // image row of buf_'s first row
  int next_ = 0;   // image row the decoder reads next
};

}  // namespace

Tensor pad_crop(const Tensor& hwc, int pad, int dy, int dx) {
  ImageView v = ImageView::of(hwc, "pad_crop");
  if (pad < 0 || dy < 0 || dx < 0 || dy > 2 * pad || dx > 2 * pad)
    throw_error(ErrorCode::kInvalidArgument, "pad_crop",
                "need 0 <= dy, dx <= 2 * pad, got pad " + std::to_string(pad) + ", dy " +
                    std::to_string(dy) + ", dx " + std::to_string(dx));
  Tensor out = pad_crop_view(v, pad, dy, dx);
  return hwc.rank() == 2 ? out.reshaped(hwc.shape()) : out;
}

Tensor random_pad_crop(const Tensor& hwc, int pad, Rng& rng) {
  const int dy = static_cast<int>(rng.uniform(static_cast<uint64_t>(2 * pad + 1)));
  const int dx = static_cast<int>(rng.uniform(static_cast<uint64_t>(2 * pad + 1)));
  return pad_crop(hwc, pad, dy, dx);
}

Tensor hflip(const Tensor& hwc) {
  ImageView v = ImageView::of(hwc, "flip");
  return detail::resample(v, detail::identity_taps(0, v.height, false),
                          detail::identity_taps(0, v.width, true), nullptr, nullptr)
      .reshaped(hwc.shape());
}

Tensor crop(const Tensor& hwc, const Rect& r) {
  ImageView v = ImageView::of(hwc, "crop");
  if (r.y < 0 || r.x < 0 || r.height <= 0 || r.width <= 0 || r.y + r.height > v.height ||
      r.x + r.width > v.width)
    throw_error(ErrorCode::kInvalidArgument, "crop",
                "rect " + std::to_string(r.width) + "x" + std::to_string(r.height) + "+" +
                    std::to_string(r.x) + "+" + std::to_string(r.y) + " is outside the " +
                    std::to_string(v.width) + "x" + std::to_string(v.height) + " image");
  return detail::resample(v, detail::identity_taps(r.y, r.height, false),
                          detail::identity_taps(r.x, r.width, false), nullptr, nullptr);
}

Tensor normalize(const Tensor& hwc, const NormalizeOptions& options) {
  ImageView v = ImageView::of(hwc, "normalize");
  AugmentOptions o;
  o.normalize = options;
  Geometry g;
  g.ty = detail::identity_taps(0, v.height, false);
  g.tx = detail::identity_taps(0, v.width, false);
  return finish(detail::row_source(v), g, o);
}

void validate(const AugmentOptions& o) {
  auto bad = [](const std::string& m) { throw_error(ErrorCode::kInvalidArgument, "augment", m); };
  if (o.pad_crop < 0) bad("pad_crop must be >= 0, got " + std::to_string(o.pad_crop));
  if (o.random_resized_crop) {
    const auto& r = *o.random_resized_crop;
    if (r.height <= 0 || r.width <= 0) bad("random_resized_crop size must be positive");
    if (!(r.scale_min > 0 && r.scale_min <= r.scale_max && r.scale_max <= 1))
      bad("random_resized_crop scale must satisfy 0 < min <= max <= 1");
    if (!(r.ratio_min > 0 && r.ratio_min <= r.ratio_max))
      bad("random_resized_crop ratio must satisfy 0 < min <= max");
  }
  const bool resize = o.resize_shorter != 0 || o.resize_height != 0 || o.resize_width != 0;
  if (o.resize_shorter < 0 || o.resize_height < 0 || o.resize_width < 0 ||
      (o.resize_shorter == 0 && (o.resize_height > 0) != (o.resize_width > 0)) ||
      (o.resize_shorter > 0 && o.resize_height > 0))
    bad("resize needs a positive shorter-side size or a positive height and width");
  if (resize && o.random_resized_crop) bad("random_resized_crop and resize are exclusive");
  if (o.center_crop_height < 0 || o.center_crop_width < 0 ||
      (o.center_crop_height > 0) != (o.center_crop_width > 0))
    bad("center_crop needs a positive height and width");
  if (!(o.flip_probability >= 0 && o.flip_probability <= 1))
    bad("flip probability must be in [0, 1]");
  if (o.normalize) {
    const auto& n = *o.normalize;
    if (!n.mean.empty() && !n.std.empty() && n.mean.size() != n.std.size() && n.mean.size() != 1 &&
        n.std.size() != 1)
      bad("normalize mean and std have different lengths");
    for (float s : n.std)
      if (!(s > 0)) bad("normalize std values must be > 0");
  }
}

Tensor augment(const Tensor& hwc, const AugmentOptions& o, Rng& rng) {
  ImageView v = ImageView::of(hwc, "augment");
  Tensor padded;
  if (o.pad_crop > 0) {
    const int dy = static_cast<int>(rng.uniform(static_cast<uint64_t>(2 * o.pad_crop + 1)));
    const int dx = static_cast<int>(rng.uniform(static_cast<uint64_t>(2 * o.pad_crop + 1)));
    padded = pad_crop_view(v, o.pad_crop, dy, dx);
    v = ImageView::of(padded, "augment");
  }
  const Geometry& g = plan(v.height, v.width, o, rng);
  if (g.identity && !o.normalize) {
    const Tensor& out = padded.defined() ? padded : hwc;
    return out.rank() == 3 ? out : out.reshaped({v.height, v.width, 1});
  }
  return finish(detail::row_source(v), g, o);
}

Tensor decode_augment(std::string_view bytes, const DecodeOptions& decode, const AugmentOptions& o,
                      Rng& rng) {
  if (o.pad_crop > 0 || sniff_image_format(bytes) != ImageFormat::kJpeg)
    return augment(decode_image(bytes, decode), o, rng);
  JpegRegionDecoder& dec = JpegRegionDecoder::thread_decoder();
  const ImageInfo info = dec.read_header(bytes, decode);
  int denom = 1;
  const Geometry& g = plan(info.height, info.width, o, rng, o.decoder_scale, &denom);
  if (g.identity && !o.normalize) return decode_jpeg(bytes, decode);
  if (denom > 1) dec.scale_down(denom);
  JpegRows rows(dec, dec.start(g.ty.lo, g.tx.lo, g.ty.hi - g.ty.lo, g.tx.hi - g.tx.lo));
  return finish(rows.source(), g, o);
}

}  // namespace dataecho
