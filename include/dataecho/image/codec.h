// Image codecs: JPEG through libjpeg-turbo (TurboJPEG for whole images, its libjpeg API
// for region decodes), PNG through libspng. Decoded images are uint8 HWC tensors with 1
// (grayscale) or 3 (RGB) channels; alpha is dropped.
//
// Thread-safety: every function is safe to call from any number of threads at once. Each
// JPEG is decoded with a fresh libjpeg decompressor (0.12 us to make): a reused one keeps
// the previous image's tables, which a JPEG lacking its own would silently use. Bad bytes
// never crash: they throw dataecho::Error (stage "decode_image" or "encode_image", code
// kDataLoss for corrupt input).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataecho/core/tensor.h"

namespace dataecho {

// The stage a decoding error names (Error::stage()).
inline constexpr const char* kDecodeImageStage = "decode_image";

enum class ImageFormat { kUnknown, kJpeg, kPng };
const char* image_format_name(ImageFormat format);  // "jpeg", "png", "unknown"

// The format from the first bytes (JPEG: FF D8 FF; PNG: the 8-byte signature).
ImageFormat sniff_image_format(std::string_view bytes);

struct DecodeOptions {
  // 0: as stored (1 for grayscale sources, 3 for everything else); 1 or 3: converted.
  int channels = 0;
  // JPEG warnings (premature end of data, corrupt entropy segments) are errors. With
  // false, libjpeg's repair applies (missing rows come out grey), as PIL does.
  bool strict = true;
  // Images with more pixels are refused before any allocation: a corrupt header must
  // not ask for gigabytes.
  int64_t max_pixels = int64_t{1} << 28;
  // JPEG: entropy-decode baseline scans with dataecho's faster Huffman decoder (the same
  // coefficients as libjpeg's; docs/image.md). false: libjpeg's own decoder, as does
  // DATAECHO_JPEG_HUFFMAN=libjpeg in the environment for the whole process. It is also
  // off for a process whose libjpeg fails the start-up self-test, or a build against a
  // libjpeg-turbo it was not checked against (detail::fast_huffman_status).
  bool fast_huffman = true;
};

// What the header says; reads no pixel data.
struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int height = 0;
  int width = 0;
  int channels = 0;  // as stored: 1 or 3 (alpha not counted)
};
ImageInfo read_image_info(std::string_view bytes);

// JPEG or PNG (sniffed) -> uint8 [height, width, channels].
Tensor decode_image(std::string_view bytes, const DecodeOptions& options = {});
Tensor decode_jpeg(std::string_view bytes, const DecodeOptions& options = {});
Tensor decode_png(std::string_view bytes, const DecodeOptions& options = {});

// A decoded region of an image, in memory owned by the caller.
struct DecodedRegion {
  const uint8_t* data = nullptr;  // row 0 is image row `y`, column 0 is image column `x`
  int64_t stride = 0;             // bytes between rows
  int y = 0, x = 0, height = 0, width = 0, channels = 0;
  int image_height = 0, image_width = 0;
};

// A JPEG decoder that can decode a sub-rectangle only (libjpeg-turbo's
// jpeg_crop_scanline / jpeg_skip_scanlines): rows outside it skip the IDCT and colour
// conversion, columns outside it are not reconstructed at all. Pixels inside the
// requested rectangle equal those of a whole-image decode (the columns around it that
// come back too may not). Not thread-safe: one per thread (thread_decoder()).
class JpegRegionDecoder {
 public:
  JpegRegionDecoder();
  ~JpegRegionDecoder();
  JpegRegionDecoder(const JpegRegionDecoder&) = delete;
  JpegRegionDecoder& operator=(const JpegRegionDecoder&) = delete;

  // Reads the header. Must precede decode().
  ImageInfo read_header(std::string_view bytes, const DecodeOptions& options = {});
  // Decodes at least rows [y, y+height) and columns [x, x+width) of the image whose
  // header was read last; the region returned may start left of x and end right of
  // x + width (iMCU alignment and a margin) and is valid until the next call.
  // `scratch` holds the pixels.
  DecodedRegion decode(int y, int x, int height, int width, std::vector<uint8_t>& scratch);

  // Between read_header() and start()/decode(): decode the image scaled down by
  // `denom` (1, 2, 4 or 8) in libjpeg's inverse DCT, which reconstructs each 8x8 block
  // at 8/denom pixels a side from its low frequencies. Regions are then given in the
  // scaled image, whose size is returned ({height, width}: the image's, divided by
  // denom and rounded up). Work after entropy decoding shrinks by about denom^2.
  std::pair<int, int> scale_down(int denom);

  // The same region, streamed: start() skips to row y and returns the region's
  // geometry (data is null); each read_rows() then decodes the next rows, at most
  // `max_rows`, into `out` (rows `stride` bytes apart, stride >= the region's) and
  // returns how many (0 once all `height` rows are read). A consumer that resamples
  // as rows arrive needs a few rows of memory instead of the whole region. finish()
  // ends a region early; read_header() does too.
  DecodedRegion start(int y, int x, int height, int width);
  int read_rows(uint8_t* out, int64_t stride, int max_rows);
  void finish();
  // Where decoded rows should start to stay in the cache: kRowSkew bytes past a 64-byte
  // boundary (and `stride` a multiple of 64). libjpeg-turbo's SIMD colour conversion
  // writes a row that starts on a 16-byte (SSE2) or 32-byte (AVX2) boundary with
  // non-temporal stores (movntdq): the row goes to memory, and whoever reads it next
  // waits for it to come back. A row 8 bytes off takes its plain-store path.
  static constexpr size_t kRowSkew = 8;

  static JpegRegionDecoder& thread_decoder();

 private:
  struct State;
  State* s_;
};

// Encoders (for `dataecho convert` and tests). `hwc` is uint8 [h, w, 1 or 3].
std::string encode_png(const Tensor& hwc, int compression_level = 6);
// quality 1..100; RGB images use 4:2:0 chroma subsampling (what PIL writes by default).
std::string encode_jpeg(const Tensor& hwc, int quality = 90);

}  // namespace dataecho
