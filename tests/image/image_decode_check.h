// The check of fuzz/image_decode_fuzz.cc, shared with the replay tests
// (tests/image/jpeg_huffman_test.cc). Bad bytes must come back as a dataecho::Error (any
// other exception escapes), never a crash, a hang or an allocation the header asked
// for. Where both a whole decode and the fused one succeed in strict mode, the fused
// output must equal augment(decode_image(bytes)) bit for bit, as decode_augment
// promises, with the whole decode made by libjpeg's own Huffman decoder and the fused
// one by dataecho's (src/image/jpeg_huffman.h), so that the one checks the other; with
// decoder_scale (option bit 0x80), which lets libjpeg scale large crops down and so
// promises only a close output, it must have the same shape.
//
// The first two bytes choose the options; the rest is the image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "dataecho/core/error.h"
#include "dataecho/core/rng.h"
#include "dataecho/image/codec.h"
#include "dataecho/image/transforms.h"

namespace dataecho::testing {

inline AugmentOptions augment_options(uint8_t pick) {
  AugmentOptions a;
  switch (pick % 5) {
    case 0:  // the ImageNet recipe, small
      a.random_resized_crop = RandomResizedCropOptions{};
      a.random_resized_crop->height = a.random_resized_crop->width = 24;
      break;
    case 1:
      a.resize_shorter = 20;
      a.center_crop_height = a.center_crop_width = 16;
      break;
    case 2:
      a.pad_crop = 4;
      break;
    case 3:
      a.resize_height = 9;
      a.resize_width = 33;
      a.antialias = (pick & 0x10) != 0;
      break;
    default:
      a.center_crop_height = 5;
      a.center_crop_width = 7;
      break;
  }
  if (pick & 0x20) a.flip_probability = 0.5;
  if (pick & 0x40) a.normalize = NormalizeOptions{};
  if (pick & 0x80) a.decoder_scale = true;
  return a;
}

// Empty when the promises hold; else what differed.
inline std::string check_image_decode(const uint8_t* data, size_t size) {
  if (size < 2) return {};
  const uint8_t flags = data[0], pick = data[1];
  std::string_view bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  DecodeOptions decode;
  decode.channels = (flags & 3) == 1 ? 1 : (flags & 3) == 2 ? 3 : 0;
  decode.strict = (flags & 4) == 0;
  decode.max_pixels = int64_t{1} << 20;  // keeps each input fast; the check is what counts
  AugmentOptions options = augment_options(pick);
  uint64_t seed = flags >> 3;

  try {
    (void)read_image_info(bytes);
  } catch (const Error&) {
  }
  Tensor whole, fused;
  DecodeOptions reference = decode;
  reference.fast_huffman = false;  // the reference: libjpeg's Huffman decoder
  try {
    whole = decode_image(bytes, reference);
  } catch (const Error&) {
  }
  try {
    Rng rng(seed);
    fused = decode_augment(bytes, decode, options, rng);
  } catch (const Error&) {
  }
  if (whole.defined() && fused.defined() && decode.strict) {
    Rng rng(seed);
    Tensor expected = augment(whole, options, rng);
    if (options.decoder_scale) {
      if (expected.shape() != fused.shape())  // scaled: a different shape
        return "decode_augment with decoder_scale gave " + shape_to_string(fused.shape()) +
               ", augment(decode_image) " + shape_to_string(expected.shape());
    } else if (expected.nbytes() != fused.nbytes() ||
               std::memcmp(expected.raw_data(), fused.raw_data(), fused.nbytes()) != 0) {
      return "decode_augment differs from augment(decode_image)";
    }
  }
  return {};
}

}  // namespace dataecho::testing
