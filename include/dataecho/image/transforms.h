// Image transforms on uint8 HWC tensors: resize, crops, flip, normalize, and the fused
// augmentation that does crop + resize + flip + normalize in one pass over the pixels
// (and, from JPEG bytes, decodes only the region the crop keeps).
//
// Resampling is separable with a triangle (bilinear) filter on pixel centres, as PIL's
// and torchvision's "bilinear" resize: upscaling interpolates between the 2 nearest
// pixels, downscaling widens the filter to the scale (antialiasing) unless turned off.
// Pixels outside a crop are never read (edges replicate).
//
// Randomness comes only from the Rng passed in, in a fixed order (pad_crop offsets, then
// the random-resized-crop attempts, then the flip), so that the same Rng state gives the
// same output. Thread-safety: all functions are reentrant; they use per-thread scratch.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "dataecho/core/rng.h"
#include "dataecho/core/tensor.h"
#include "dataecho/image/codec.h"

namespace dataecho {

struct Rect {
  int y = 0, x = 0, height = 0, width = 0;
  friend bool operator==(const Rect&, const Rect&) = default;
};

// The Inception / torchvision RandomResizedCrop recipe: up to 10 draws of an area
// fraction in [scale_min, scale_max] and a log-uniform aspect ratio in
// [ratio_min, ratio_max]; the first that fits is placed uniformly; if none fits, the
// central crop closest to the ratio range.
struct RandomResizedCropOptions {
  int height = 224, width = 224;  // output size
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};
Rect random_resized_crop_rect(int height, int width, const RandomResizedCropOptions& options,
                              Rng& rng);

// Per-channel (x / 255 - mean) / std, in [0, 1] units as torchvision's Normalize.
// Empty mean and std: x / 255. One value applies to every channel.
struct NormalizeOptions {
  std::vector<float> mean;
  std::vector<float> std;
};

// A uint8 HWC image (rank 3, or rank 2 read as one channel). Throws kInvalidArgument
// naming `what` for anything else.
struct ImageView {
  const uint8_t* data = nullptr;
  int64_t stride = 0;  // bytes per row
  int height = 0, width = 0, channels = 0;
  static ImageView of(const Tensor& hwc, const char* what = "image");
};

// ---- single transforms (uint8 HWC in; uint8 HWC out unless said otherwise) ----

Tensor resize(const Tensor& hwc, int height, int width, bool antialias = true);
// Zero-pads `pad` pixels on every side and crops the original size back at offset
// (dy, dx) of the padded image, 0 <= dy, dx <= 2 * pad.
Tensor pad_crop(const Tensor& hwc, int pad, int dy, int dx);
Tensor random_pad_crop(const Tensor& hwc, int pad, Rng& rng);
Tensor hflip(const Tensor& hwc);
Tensor crop(const Tensor& hwc, const Rect& rect);
// float32 CHW.
Tensor normalize(const Tensor& hwc, const NormalizeOptions& options = {});

// ---- the fused augmentation ----

// Applied in this order: pad_crop, random_resized_crop or resize, center_crop, flip,
// normalize. Geometry after pad_crop, the flip and the normalization are one pass.
struct AugmentOptions {
  int pad_crop = 0;  // 0: none
  std::optional<RandomResizedCropOptions> random_resized_crop;
  // resize: `resize_shorter` scales the shorter side to that size keeping the aspect
  // ratio (torchvision's Resize(int)); or an exact resize_height x resize_width.
  int resize_shorter = 0;
  int resize_height = 0, resize_width = 0;
  int center_crop_height = 0, center_crop_width = 0;  // 0: none
  double flip_probability = 0.0;                      // horizontal flip; `"flip": true` means 0.5
  std::optional<NormalizeOptions> normalize;          // set: float32 CHW output; else uint8 HWC
  bool antialias = true;
  // decode_augment only (augment receives pixels and ignores it): when the crop of a
  // JPEG is at least 2, 4 or 8 times the output in both directions, decode it scaled
  // down by that factor in the inverse DCT (libjpeg's DCT scaling, as PIL's
  // Image.draft and tf.image.decode_jpeg's `ratio` do) and resample the rest. The crop
  // is then placed on the scaled image's pixel grid (its edges move by less than half a
  // scaled pixel), and the output is close to, not equal to, the exact path's. Large
  // photos gain most: reconstruction and resampling shrink with the square of the
  // factor; entropy decoding does not.
  bool decoder_scale = false;
};

// Throws kInvalidArgument for inconsistent options (negative sizes, both
// random_resized_crop and resize, wrong mean/std lengths).
void validate(const AugmentOptions& options);

Tensor augment(const Tensor& hwc, const AugmentOptions& options, Rng& rng);

// decode_image + augment, fused: for a JPEG whose augmentation starts with a crop
// (random_resized_crop, or resize + center_crop), only the rows and columns the crop
// needs are decoded. The output equals augment(decode_image(bytes)) exactly, unless
// options.decoder_scale lets the decoder scale a large crop down.
Tensor decode_augment(std::string_view bytes, const DecodeOptions& decode,
                      const AugmentOptions& options, Rng& rng);

}  // namespace dataecho
