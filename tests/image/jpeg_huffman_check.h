// The differential check of dataecho's JPEG Huffman decoder (src/image/jpeg_huffman.h)
// against libjpeg's, shared by fuzz/jpeg_huffman_fuzz.cc and the corpus replay tests
// (tests/image/jpeg_huffman_test.cc). One input is an option byte, then a file:
//   bits 0-1: scale 1/1, 1/2, 1/4 or 1/8 (1/8 decodes DC coefficients only)
//   bit 2:    grey output (a colour file's chroma coefficients are read past)
//   bits 3-7: the first 0-31 MCUs are read past without a buffer, as a skip does
// Two promises are checked:
// - Coefficients. Where dataecho's decoder decodes the whole scan without handing it
//   back, libjpeg's decodes it too, with no more warnings (so no strict-mode error it
//   would raise is missed) and the same coefficient in every block.
// - Pixels. decode_image with each decoder, strict and lenient: the same error
//   message, or the same pixels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "dataecho/core/error.h"
#include "dataecho/image/codec.h"
#include "image/jpeg_huffman.h"  // src/: detail::decode_scan_coefficients

namespace dataecho::testing {

// Empty when both promises hold; else what differed.
inline std::string check_jpeg_huffman(const uint8_t* data, size_t size) {
  if (size < 1) return {};
  const uint8_t opt = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const int denom = 1 << (opt & 3);
  const bool grey = (opt & 4) != 0;
  const long skip = opt >> 3;
  using Outcome = detail::ScanCoefficients::Outcome;
  constexpr int64_t kMaxPixels = int64_t{1} << 20;  // keeps each input fast
  const detail::ScanCoefficients fast =
      detail::decode_scan_coefficients(bytes, true, denom, grey, skip, kMaxPixels);
  const detail::ScanCoefficients lib =
      detail::decode_scan_coefficients(bytes, false, denom, grey, skip, kMaxPixels);
  if (fast.outcome == Outcome::kDecoded) {
    if (lib.outcome != Outcome::kDecoded)
      return "dataecho decoded a scan libjpeg refused: " + lib.message;
    if (lib.warnings != fast.warnings)
      return "dataecho decoded a scan on which libjpeg warned: " + lib.message;
    if (lib.blocks != fast.blocks) {
      for (size_t i = 0; i < lib.blocks.size(); ++i)
        if (lib.blocks[i] != fast.blocks[i])
          return "coefficient " + std::to_string(i % 64) + " of block " + std::to_string(i / 64) +
                 ": dataecho " + std::to_string(fast.blocks[i]) + ", libjpeg " +
                 std::to_string(lib.blocks[i]);
      return "different block counts";
    }
  } else if (fast.outcome == Outcome::kError && lib.outcome != Outcome::kError) {
    return "dataecho's start failed where libjpeg's did not: " + fast.message;
  }
  for (bool strict : {true, false}) {
    DecodeOptions options;
    options.channels = grey ? 1 : 0;
    options.strict = strict;
    options.max_pixels = kMaxPixels;
    std::string results[2], errors[2];
    for (int f = 0; f < 2; ++f) {
      options.fast_huffman = f == 1;
      try {
        const Tensor t = decode_image(bytes, options);
        results[f] = shape_to_string(t.shape()) + "|";
        results[f].append(reinterpret_cast<const char*>(t.raw_data()), t.nbytes());
      } catch (const Error& e) {
        errors[f] = e.what();
      }
    }
    const std::string mode = std::string("decode_image, strict ") + (strict ? "on" : "off") + ": ";
    if (errors[0] != errors[1])
      return mode + "libjpeg's decoder: " + (errors[0].empty() ? "pixels" : errors[0]) +
             "; dataecho's: " + (errors[1].empty() ? "pixels" : errors[1]);
    if (results[0] != results[1]) {
      size_t i = 0;
      while (i < std::min(results[0].size(), results[1].size()) && results[0][i] == results[1][i])
        ++i;
      return mode + "the outputs differ from byte " + std::to_string(i) + " (" +
             results[0].substr(0, results[0].find('|')) + ")";
    }
  }
  return {};
}

}  // namespace dataecho::testing
