// Format sniffing and dispatch to the JPEG and PNG codecs.
#include <cstdio>

#include "dataecho/image/codec.h"

namespace dataecho {

ImageInfo read_png_info(std::string_view bytes);   // png_codec.cc
ImageInfo read_jpeg_info(std::string_view bytes);  // jpeg_codec.cc

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "jpeg";
    case ImageFormat::kPng:
      return "png";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

ImageFormat sniff_image_format(std::string_view b) {
  if (b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF && static_cast<uint8_t>(b[1]) == 0xD8 &&
      static_cast<uint8_t>(b[2]) == 0xFF)
    return ImageFormat::kJpeg;
  static constexpr char kPngSig[] = "\x89PNG\r\n\x1a\n";
  if (b.size() >= 8 && b.substr(0, 8) == std::string_view(kPngSig, 8)) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

namespace {

[[noreturn]] void not_an_image(std::string_view b) {
  std::string first;
  for (size_t i = 0; i < b.size() && i < 4; ++i) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), i ? " %02x" : "%02x",
                  static_cast<unsigned>(static_cast<uint8_t>(b[i])));
    first += hex;
  }
  throw_error(ErrorCode::kDataLoss, "decode_image",
              b.empty() ? std::string("not a JPEG or PNG (no bytes)")
                        : "not a JPEG or PNG (first bytes " + first + ", " +
                              std::to_string(b.size()) + " bytes)");
}

}  // namespace

ImageInfo read_image_info(std::string_view bytes) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kPng:
      return read_png_info(bytes);
    case ImageFormat::kJpeg:
      return read_jpeg_info(bytes);
    case ImageFormat::kUnknown:
      break;
  }
  not_an_image(bytes);
}

Tensor decode_image(std::string_view bytes, const DecodeOptions& options) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kJpeg:
      return decode_jpeg(bytes, options);
    case ImageFormat::kPng:
      return decode_png(bytes, options);
    case ImageFormat::kUnknown:
      break;
  }
  not_an_image(bytes);
}

}  // namespace dataecho
