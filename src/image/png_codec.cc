// PNG through libspng: CRCs and the zlib stream are verified; any bit depth, palette and
// alpha are converted to 8-bit grey or RGB (alpha dropped, not composited).
#include <spng.h>

#include <memory>

#include "dataecho/image/codec.h"

namespace dataecho {
namespace {

struct CtxDeleter {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};
using Ctx = std::unique_ptr<spng_ctx, CtxDeleter>;

[[noreturn]] void png_fail(const char* what, int rc) {
  throw_error(ErrorCode::kDataLoss, kDecodeImageStage,
              std::string("bad PNG: ") + what + ": " + spng_strerror(rc));
}

Ctx open_png(std::string_view bytes, const DecodeOptions& options, spng_ihdr& ihdr) {
  Ctx ctx(spng_ctx_new(0));
  if (!ctx) throw_error(ErrorCode::kInternal, kDecodeImageStage, "spng_ctx_new failed");
  // Refuse oversized images and chunks before anything is allocated for them.
  spng_set_image_limits(ctx.get(), 1u << 24, 1u << 24);
  spng_set_chunk_limits(ctx.get(), 1u << 26, 1u << 26);
  int rc = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size());
  if (rc) png_fail("reading", rc);
  rc = spng_get_ihdr(ctx.get(), &ihdr);
  if (rc) png_fail("header", rc);
  if (static_cast<int64_t>(ihdr.width) * ihdr.height > options.max_pixels)
    throw_error(ErrorCode::kDataLoss, kDecodeImageStage,
                "PNG header gives a size of " + std::to_string(ihdr.width) + "x" +
                    std::to_string(ihdr.height) + " (limit " + std::to_string(options.max_pixels) +
                    " pixels)");
  return ctx;
}

bool is_grey(const spng_ihdr& h) {
  return h.color_type == SPNG_COLOR_TYPE_GRAYSCALE ||
         h.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
}

}  // namespace

Tensor decode_png(std::string_view bytes, const DecodeOptions& options) {
  if (options.channels != 0 && options.channels != 1 && options.channels != 3)
    throw_error(ErrorCode::kInvalidArgument, kDecodeImageStage,
                "channels must be 0, 1 or 3, got " + std::to_string(options.channels));
  spng_ihdr ihdr{};
  Ctx ctx = open_png(bytes, options, ihdr);
  const int channels = options.channels != 0 ? options.channels : (is_grey(ihdr) ? 1 : 3);
  const int64_t h = ihdr.height, w = ihdr.width;
  // G8 exists only for grey sources of at most 8 bits; everything else goes through RGB8.
  const bool direct_grey =
      channels == 1 && ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8;
  const int fmt = direct_grey ? SPNG_FMT_G8 : SPNG_FMT_RGB8;
  size_t size = 0;
  int rc = spng_decoded_image_size(ctx.get(), fmt, &size);
  if (rc) png_fail("size", rc);
  return Tensor::make(DType::kUInt8, {h, w, channels}, [&](std::byte* out) {
    if (channels == 3 || direct_grey) {
      rc = spng_decode_image(ctx.get(), out, size, fmt, 0);
      if (rc) png_fail("decoding", rc);
      return;
    }
    // Grey from colour (or from 16-bit grey): the luma libjpeg uses (BT.601).
    std::vector<uint8_t> rgb(size);
    rc = spng_decode_image(ctx.get(), rgb.data(), size, fmt, 0);
    if (rc) png_fail("decoding", rc);
    auto* dst = reinterpret_cast<uint8_t*>(out);
    for (int64_t i = 0; i < h * w; ++i) {
      const uint8_t* p = &rgb[static_cast<size_t>(i) * 3];
      dst[i] = static_cast<uint8_t>((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16);
    }
  });
}

ImageInfo read_png_info(std::string_view bytes) {
  spng_ihdr ihdr{};
  DecodeOptions unlimited;
  unlimited.max_pixels = INT64_MAX;
  Ctx ctx = open_png(bytes, unlimited, ihdr);
  ImageInfo info;
  info.format = ImageFormat::kPng;
  info.height = static_cast<int>(ihdr.height);
  info.width = static_cast<int>(ihdr.width);
  info.channels = is_grey(ihdr) ? 1 : 3;
  return info;
}

std::string encode_png(const Tensor& hwc, int compression_level) {
  if (hwc.dtype() != DType::kUInt8 || hwc.rank() != 3 ||
      (hwc.shape()[2] != 1 && hwc.shape()[2] != 3))
    throw_error(ErrorCode::kInvalidArgument, "encode_image",
                std::string("encode_png needs uint8 [h, w, 1|3], got ") + dtype_name(hwc.dtype()) +
                    " " + shape_to_string(hwc.shape()));
  Ctx ctx(spng_ctx_new(SPNG_CTX_ENCODER));
  if (!ctx) throw_error(ErrorCode::kInternal, "encode_image", "spng_ctx_new failed");
  auto fail = [](const char* what, int rc) {
    throw_error(ErrorCode::kInternal, "encode_image",
                std::string("PNG encode failed: ") + what + ": " + spng_strerror(rc));
  };
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_set_option(ctx.get(), SPNG_IMG_COMPRESSION_LEVEL, compression_level);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(hwc.shape()[1]);
  ihdr.height = static_cast<uint32_t>(hwc.shape()[0]);
  ihdr.bit_depth = 8;
  ihdr.color_type = hwc.shape()[2] == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR;
  int rc = spng_set_ihdr(ctx.get(), &ihdr);
  if (rc) fail("header", rc);
  rc = spng_encode_image(ctx.get(), hwc.raw_data(), hwc.nbytes(), SPNG_FMT_PNG,
                         SPNG_ENCODE_FINALIZE);
  if (rc) fail("encoding", rc);
  size_t len = 0;
  void* buf = spng_get_png_buffer(ctx.get(), &len, &rc);
  if (!buf) fail("buffer", rc);
  std::string out(static_cast<const char*>(buf), len);
  std::free(buf);
  return out;
}

}  // namespace dataecho
