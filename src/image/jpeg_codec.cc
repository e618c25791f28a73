// JPEG through libjpeg-turbo: TurboJPEG (tjDecompress2 / tjCompress2) for whole images,
// and its libjpeg API for region decodes, where jpeg_crop_scanline and
// jpeg_skip_scanlines avoid reconstructing pixels an augmentation throws away.
// Why this file is long: libjpeg reports errors by longjmp, so every step that can
// jump is a plain function beside the one error manager they share (ErrorManager); the
// region decoder, its hand-over to libjpeg's Huffman decoder, the coefficient seam
// that tests compare the two decoders through, and the start-up self-test built on it
// all use that manager, and splitting them would export it.
#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <turbojpeg.h>
// clang-format on

#include "dataecho/image/codec.h"
#include "image/jpeg_huffman.h"

namespace dataecho {
namespace {

// A TurboJPEG handle. Decompression takes a fresh one per image: libjpeg keeps the
// quantization and Huffman tables of the last image in its decompressor (for abbreviated
// datastreams), so a JPEG that lacks its tables decoded on a reused handle with the
// previous image's, silently, where it must be an error (found by
// fuzz/image_decode_fuzz.cc; Jpeg.MissingTablesAreAnErrorNotThePreviousImagesTables).
// Creating one measured 0.12 us against 130 us or more for the decode. Compression keeps
// one per thread: it writes every table it uses.
struct TjHandle {
  tjhandle h;
  explicit TjHandle(bool compress) : h(compress ? tjInitCompress() : tjInitDecompress()) {}
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
};

tjhandle thread_compressor() {
  thread_local TjHandle handle(true);
  if (!handle.h) throw_error(ErrorCode::kInternal, "encode_image", "tjInitCompress failed");
  return handle.h;
}

int stored_channels(int tj_colorspace) { return tj_colorspace == TJCS_GRAY ? 1 : 3; }

int output_channels(const DecodeOptions& o, int stored) {
  if (o.channels != 0 && o.channels != 1 && o.channels != 3)
    throw_error(ErrorCode::kInvalidArgument, kDecodeImageStage,
                "channels must be 0, 1 or 3, got " + std::to_string(o.channels));
  return o.channels == 0 ? stored : o.channels;
}

void check_size(int width, int height, const DecodeOptions& o, const char* what) {
  if (width <= 0 || height <= 0 || static_cast<int64_t>(width) * height > o.max_pixels)
    throw_error(ErrorCode::kDataLoss, kDecodeImageStage,
                std::string(what) + " header gives a size of " + std::to_string(width) + "x" +
                    std::to_string(height) + " (limit " + std::to_string(o.max_pixels) +
                    " pixels)");
}

// The header of `bytes` read with `h`: width, height and TurboJPEG's colourspace.
struct JpegHeader {
  int width = 0, height = 0, colorspace = 0;
};
JpegHeader read_jpeg_header(tjhandle h, std::string_view bytes) {
  JpegHeader hdr;
  int subsamp = 0;
  if (tjDecompressHeader3(h, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                          &hdr.width, &hdr.height, &subsamp, &hdr.colorspace) != 0) {
    throw_error(ErrorCode::kDataLoss, kDecodeImageStage,
                std::string("bad JPEG header: ") + tjGetErrorStr2(h) + " (" +
                    std::to_string(bytes.size()) + " bytes)");
  }
  return hdr;
}

tjhandle checked(const TjHandle& handle) {
  if (!handle.h) throw_error(ErrorCode::kInternal, kDecodeImageStage, "tjInitDecompress failed");
  return handle.h;
}

}  // namespace

// Declared in codec.cc, the only caller.
ImageInfo read_jpeg_info(std::string_view bytes) {
  TjHandle handle(false);
  const JpegHeader hdr = read_jpeg_header(checked(handle), bytes);
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  info.width = hdr.width;
  info.height = hdr.height;
  info.channels = stored_channels(hdr.colorspace);
  return info;
}

Tensor decode_jpeg(std::string_view bytes, const DecodeOptions& options) {
  // The whole image as a region of the thread's region decoder, whose Huffman decoding
  // (detail::JpegHuffman) is faster than TurboJPEG's; with TurboJPEG's settings, so the
  // same pixels (Jpeg.DecodeMatchesLibjpegScanlinesExactly checks them against
  // libjpeg's scanline API; fuzz/image_decode_fuzz against libjpeg's own Huffman
  // decoder). Before 3909486 (2026-12-02) this was tjDecompress2.
  JpegRegionDecoder& dec = JpegRegionDecoder::thread_decoder();
  const ImageInfo info = dec.read_header(bytes, options);
  const int height = info.height, width = info.width;
  const int channels = output_channels(options, info.channels);
  // The image starts JpegRegionDecoder::kRowSkew bytes past a 64-byte boundary, so
  // that libjpeg-turbo writes its rows through the cache (see there) for whoever reads
  // the image next (augment, most often at once); rows of a multiple of 16 bytes then
  // all are. Measured on AMD Zen 4 (image_bench, "decode_image + augment", 256x256
  // JPEGs): 67-68% -> 71-79% of the TurboJPEG loop on Fashion-MNIST, 75-78% -> 81-88%
  // on colour. A batch row (an OutputSlot) is written where it is: the batch goes to
  // its consumer later, and streaming it to memory costs nothing there.
  return Tensor::make(
      DType::kUInt8, {height, width, channels},
      [&](std::byte* out) {
        dec.start(0, 0, height, width);
        dec.read_rows(reinterpret_cast<uint8_t*>(out), int64_t{width} * channels, height);
      },
      JpegRegionDecoder::kRowSkew);
}

std::string encode_jpeg(const Tensor& hwc, int quality) {
  if (hwc.dtype() != DType::kUInt8 || hwc.rank() != 3 ||
      (hwc.shape()[2] != 1 && hwc.shape()[2] != 3))
    throw_error(ErrorCode::kInvalidArgument, "encode_image",
                std::string("encode_jpeg needs uint8 [h, w, 1|3], got ") + dtype_name(hwc.dtype()) +
                    " " + shape_to_string(hwc.shape()));
  if (quality < 1 || quality > 100)
    throw_error(ErrorCode::kInvalidArgument, "encode_image",
                "JPEG quality must be 1..100, got " + std::to_string(quality));
  const int height = static_cast<int>(hwc.shape()[0]), width = static_cast<int>(hwc.shape()[1]);
  const int channels = static_cast<int>(hwc.shape()[2]);
  tjhandle h = thread_compressor();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(h, reinterpret_cast<const unsigned char*>(hwc.raw_data()), width,
                       width * channels, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &out, &size,
                       channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0);
  if (rc != 0) {
    if (out) tjFree(out);
    throw_error(ErrorCode::kInternal, "encode_image",
                std::string("JPEG encode failed: ") + tjGetErrorStr2(h));
  }
  std::string result(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  return result;
}

// ---- region decoder (libjpeg API) ----

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  bool strict = true;
  char message[JMSG_LENGTH_MAX] = {};
  int warnings = 0;  // counted when not strict (detail::decode_scan_coefficients)
};

void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void on_message(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (level >= 0) return;  // trace and informational messages
  // A warning: corrupt or truncated data.
  if (err->strict) {
    (*cinfo->err->format_message)(cinfo, err->message);
    std::longjmp(err->jump, 2);
  }
  if (err->warnings++ == 0) (*cinfo->err->format_message)(cinfo, err->message);
}

// detail::JpegHuffman's fallback: the scan needs libjpeg's own decoder (corrupt or
// truncated data). The region is decoded again from where it stands with it, so what
// libjpeg does with such data (warn, error, or fill in) is what happens.
constexpr int kNeedsLibjpeg = 3;
void huffman_fallback(j_decompress_ptr cinfo) {
  std::longjmp(reinterpret_cast<ErrorManager*>(cinfo->err)->jump, kNeedsLibjpeg);
}

// The faster Huffman decoder is on unless DATAECHO_JPEG_HUFFMAN=libjpeg (for A/B
// measurements; detail::use_fast_huffman below for tests).
std::atomic<bool> fast_huffman_requested = [] {
  const char* v = std::getenv("DATAECHO_JPEG_HUFFMAN");
  return !(v && std::strcmp(v, "libjpeg") == 0);
}();
std::atomic<bool> self_test_failed = false;
std::atomic<bool> self_test_said = false;

}  // namespace

namespace detail {
void use_fast_huffman(bool on) { fast_huffman_requested = on; }
thread_local long huffman_fallbacks = 0;
thread_local long huffman_scans = 0;
long jpeg_huffman_fallbacks() { return huffman_fallbacks; }
long jpeg_huffman_scans() { return huffman_scans; }

const char* fast_huffman_status_name(FastHuffmanStatus status) {
  switch (status) {
    case FastHuffmanStatus::kOn:
      return "on";
    case FastHuffmanStatus::kOffByRequest:
      return "off (DATAECHO_JPEG_HUFFMAN=libjpeg)";
    case FastHuffmanStatus::kOffBySelfTest:
      return "off (the self-test found a difference from libjpeg)";
    case FastHuffmanStatus::kOffByBuild:
      return "off (built against a libjpeg it was not checked against)";
  }
  return "unknown";
}

FastHuffmanStatus fast_huffman_status() {
  if (!fast_huffman_built()) return FastHuffmanStatus::kOffByBuild;
  if (!fast_huffman_requested) return FastHuffmanStatus::kOffByRequest;
  static const bool passed = run_jpeg_huffman_self_test();
  return passed && !self_test_failed ? FastHuffmanStatus::kOn : FastHuffmanStatus::kOffBySelfTest;
}

void reset_jpeg_huffman_self_test() {
  self_test_failed = false;
  self_test_said = false;
}
}  // namespace detail

// State holds the anonymous namespace's ErrorManager. g++ warns of that
// (-Wsubobject-linkage) when this file is compiled inside a unity batch, where it is no
// longer the main file; it is still one translation unit's definition, so nothing can
// differ between units. ErrorManager stays where it is: its name is part of the mangled
// names that src/python/function_order.txt lists.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsubobject-linkage"
#endif
struct JpegRegionDecoder::State {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  bool header_ok = false;
  int out_channels = 0;
  int64_t max_pixels = 0;
  int out_height = 0, out_width = 0;  // of the image as decoded (scale_down())
  int rows_left = 0;                  // of the region being streamed
  bool started = false;               // a region is being streamed (decompression in progress)
  bool done = false;                  // the region's last row was read: read_rows returns 0
  // What a decode that starts again with libjpeg's Huffman decoder needs (see
  // huffman_fallback): the bytes, the scale, the region's columns as asked of
  // jpeg_crop_scanline, and its next row to be read.
  const unsigned char* data = nullptr;
  unsigned long size = 0;
  int denom = 1;
  int next_row = 0;
  bool fast_huffman = true;  // DecodeOptions::fast_huffman of the image being decoded
  JDIMENSION crop_x = 0, crop_width = 0;
  detail::JpegHuffman huffman;

  void configure();
  void restart_with_libjpeg(int y);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

JpegRegionDecoder::JpegRegionDecoder() : s_(new State) {
  std::memset(&s_->cinfo, 0, sizeof(s_->cinfo));
  s_->cinfo.err = jpeg_std_error(&s_->err.pub);
  s_->err.pub.error_exit = on_error;
  s_->err.pub.emit_message = on_message;
  jpeg_create_decompress(&s_->cinfo);
}

JpegRegionDecoder::~JpegRegionDecoder() {
  jpeg_destroy_decompress(&s_->cinfo);
  delete s_;
}

JpegRegionDecoder& JpegRegionDecoder::thread_decoder() {
  thread_local JpegRegionDecoder decoder;
  return decoder;
}

namespace {

// Kept free of C++ objects with destructors: longjmp must not skip any.
int read_header_c(jpeg_decompress_struct* cinfo, ErrorManager* err, const unsigned char* data,
                  unsigned long size) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  // A fresh decompressor per image (see TjHandle above: the last image's tables stay in
  // a reused one). Destroying keeps cinfo->err; create allocates, so it is in here,
  // where an allocation failure lands in the setjmp above.
  jpeg_destroy_decompress(cinfo);
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, data, size);
  jpeg_read_header(cinfo, TRUE);
  return 0;
}

// Sets the scale 1/denom and computes the output size it gives.
int scale_c(jpeg_decompress_struct* cinfo, ErrorManager* err, int denom) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned int>(denom);
  jpeg_calc_output_dimensions(cinfo);
  return 0;
}

// Starts decompression of rows [y, ...) and columns [*x, *x + *width) (widened by
// jpeg_crop_scanline to whole iMCUs), skipping the rows above; with `huffman`'s
// Huffman decoder where it applies. -kNeedsLibjpeg: start again without it.
int start_region_c(jpeg_decompress_struct* cinfo, ErrorManager* err, int y, JDIMENSION* x,
                   JDIMENSION* width, detail::JpegHuffman* huffman) {
  if (int rc = setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return rc == kNeedsLibjpeg ? -kNeedsLibjpeg : -1;
  }
  jpeg_start_decompress(cinfo);
  if (huffman && huffman->install(cinfo, huffman_fallback)) ++detail::huffman_scans;
  if (*x != 0 || *width != cinfo->output_width) jpeg_crop_scanline(cinfo, x, width);
  if (y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y));
  return 0;
}

// Reads exactly `rows` scanlines, `stride` bytes apart, counting those read in *done.
// -kNeedsLibjpeg: start again without the faster Huffman decoder.
int read_rows_c(jpeg_decompress_struct* cinfo, ErrorManager* err, unsigned char* out, size_t stride,
                int rows, int* done) {
  *done = 0;
  if (int rc = setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return rc == kNeedsLibjpeg ? -kNeedsLibjpeg : -1;
  }
  for (int row = 0; row < rows;) {
    // Several rows per call, as tjDecompress2 does: a 2x2-subsampled image yields two
    // rows per upsampling step, and asking for one row at a time costs a copy.
    JSAMPROW ptrs[16];
    const int want = std::min(16, rows - row);
    for (int i = 0; i < want; ++i) ptrs[i] = out + static_cast<size_t>(row + i) * stride;
    JDIMENSION n = jpeg_read_scanlines(cinfo, ptrs, static_cast<JDIMENSION>(want));
    if (n == 0) {  // cannot happen with a memory source; never loop forever
      std::snprintf(err->message, sizeof(err->message), "no scanline returned at row %u",
                    cinfo->output_scanline);
      jpeg_abort_decompress(cinfo);
      return -1;
    }
    row += static_cast<int>(n);
    *done = row;
  }
  return 0;
}

[[noreturn]] void corrupt(const ErrorManager& err) {
  throw_error(ErrorCode::kDataLoss, kDecodeImageStage,
              std::string("corrupt JPEG data: ") + err.message);
}

}  // namespace

// The settings TurboJPEG uses, so that pixels equal tjDecompress2's.
void JpegRegionDecoder::State::configure() {
  cinfo.out_color_space = out_channels == 1 ? JCS_GRAYSCALE : JCS_EXT_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
}

// Decodes the region again from row `y` on with libjpeg's own Huffman decoder, after
// the faster one met data it leaves to libjpeg (huffman_fallback): the same header,
// settings, scale and columns. libjpeg's errors then are the decode's.
void JpegRegionDecoder::State::restart_with_libjpeg(int y) {
  ++detail::huffman_fallbacks;
  if (read_header_c(&cinfo, &err, data, size) != 0) corrupt(err);
  configure();
  if (denom != 1 && scale_c(&cinfo, &err, denom) != 0) corrupt(err);
  JDIMENSION cx = crop_x, cw = crop_width;
  if (start_region_c(&cinfo, &err, y, &cx, &cw, nullptr) != 0) corrupt(err);
}

ImageInfo JpegRegionDecoder::read_header(std::string_view bytes, const DecodeOptions& options) {
  State& s = *s_;
  s.header_ok = false;
  s.started = s.done = false;  // read_header_c aborts whatever was in progress
  s.err.strict = options.strict;
  s.fast_huffman = options.fast_huffman;
  if (read_header_c(&s.cinfo, &s.err, reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size()) != 0)
    throw_error(ErrorCode::kDataLoss, kDecodeImageStage,
                std::string("bad JPEG header: ") + s.err.message + " (" +
                    std::to_string(bytes.size()) + " bytes)");
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  info.width = static_cast<int>(s.cinfo.image_width);
  info.height = static_cast<int>(s.cinfo.image_height);
  check_size(info.width, info.height, options, "JPEG");
  if (s.cinfo.jpeg_color_space == JCS_CMYK || s.cinfo.jpeg_color_space == JCS_YCCK)
    throw_error(ErrorCode::kDataLoss, kDecodeImageStage, "CMYK/YCCK JPEGs are not supported");
  info.channels = s.cinfo.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
  s.out_channels = output_channels(options, info.channels);
  s.configure();
  s.data = reinterpret_cast<const unsigned char*>(bytes.data());
  s.size = bytes.size();
  s.denom = 1;
  s.out_height = info.height;
  s.out_width = info.width;
  s.header_ok = true;
  return info;
}

std::pair<int, int> JpegRegionDecoder::scale_down(int denom) {
  State& s = *s_;
  if (!s.header_ok)
    throw_error(ErrorCode::kInternal, kDecodeImageStage,
                "JpegRegionDecoder::scale_down before read_header");
  if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
    throw_error(ErrorCode::kInvalidArgument, kDecodeImageStage,
                "scale_down takes 1, 2, 4 or 8, got " + std::to_string(denom));
  if (scale_c(&s.cinfo, &s.err, denom) != 0) {
    s.header_ok = false;
    corrupt(s.err);
  }
  s.denom = denom;
  s.out_height = static_cast<int>(s.cinfo.output_height);
  s.out_width = static_cast<int>(s.cinfo.output_width);
  return {s.out_height, s.out_width};
}

DecodedRegion JpegRegionDecoder::start(int y, int x, int height, int width) {
  State& s = *s_;
  if (!s.header_ok)
    throw_error(ErrorCode::kInternal, kDecodeImageStage,
                "JpegRegionDecoder::start before read_header");
  s.header_ok = false;
  const int iw = s.out_width, ih = s.out_height;
  if (y < 0 || x < 0 || height <= 0 || width <= 0 || y + height > ih || x + width > iw)
    throw_error(ErrorCode::kInvalidArgument, kDecodeImageStage,
                "region " + std::to_string(width) + "x" + std::to_string(height) + "+" +
                    std::to_string(x) + "+" + std::to_string(y) + " is outside the " +
                    std::to_string(iw) + "x" + std::to_string(ih) + " image");
  // Fancy upsampling treats the edges of a cropped scanline as image edges, so the
  // outermost columns of a region can differ from a whole-image decode. A pixel's
  // upsampled chroma reads the neighbouring chroma sample on each side, which is
  // max_h_samp_factor pixels wide: decode two samples' width beyond both sides and
  // ignore them (jpeg_crop_scanline widens further, to whole iMCUs). Checked exact
  // against whole-image decodes of random regions (Jpeg.RegionDecodeEqualsWholeImageDecode);
  // one pixel of margin is not enough for 4:2:0. Every pixel decoded here that the
  // augmentation does not need costs a full decode's worth, so the margin is kept small.
  const int margin = 2 * std::max(1, s.cinfo.max_h_samp_factor);
  const int lo = std::max(0, x - margin), hi = std::min(iw, x + width + margin);
  s.crop_x = static_cast<JDIMENSION>(lo);
  s.crop_width = static_cast<JDIMENSION>(hi - lo);
  s.next_row = y;
  JDIMENSION cx = s.crop_x, cw = s.crop_width;
  const bool fast =
      s.fast_huffman && detail::fast_huffman_status() == detail::FastHuffmanStatus::kOn;
  const int rc = start_region_c(&s.cinfo, &s.err, y, &cx, &cw, fast ? &s.huffman : nullptr);
  if (rc == -kNeedsLibjpeg)
    s.restart_with_libjpeg(y);  // the same cx and cw come out
  else if (rc != 0)
    corrupt(s.err);
  s.started = true;
  s.done = false;
  s.rows_left = height;
  DecodedRegion r;
  r.stride = static_cast<int64_t>(cw) * s.out_channels;
  r.y = y;
  r.x = static_cast<int>(cx);
  r.height = height;
  r.width = static_cast<int>(cw);
  r.channels = s.out_channels;
  r.image_height = ih;
  r.image_width = iw;
  return r;
}

int JpegRegionDecoder::read_rows(uint8_t* out, int64_t stride, int max_rows) {
  State& s = *s_;
  if (s.done) return 0;
  if (!s.started)
    throw_error(ErrorCode::kInternal, kDecodeImageStage,
                "JpegRegionDecoder::read_rows without start");
  const int rows = std::min(max_rows, s.rows_left);
  if (rows <= 0) return 0;
  int done = 0;
  int rc = read_rows_c(&s.cinfo, &s.err, out, static_cast<size_t>(stride), rows, &done);
  if (rc == -kNeedsLibjpeg) {  // rows before `done` are libjpeg's bits already
    s.started = false;
    s.restart_with_libjpeg(s.next_row + done);
    s.started = true;
    int more = 0;
    rc =
        read_rows_c(&s.cinfo, &s.err, out + static_cast<size_t>(done) * static_cast<size_t>(stride),
                    static_cast<size_t>(stride), rows - done, &more);
  }
  if (rc != 0) {
    s.started = false;  // read_rows_c aborted the decompression
    corrupt(s.err);
  }
  s.next_row += rows;
  s.rows_left -= rows;
  if (s.rows_left == 0) {
    finish();
    s.done = true;
  }
  return rows;
}

void JpegRegionDecoder::finish() {
  if (s_->started) jpeg_abort_decompress(&s_->cinfo);
  s_->started = s_->done = false;
}

DecodedRegion JpegRegionDecoder::decode(int y, int x, int height, int width,
                                        std::vector<uint8_t>& scratch) {
  DecodedRegion r = start(y, x, height, width);
  const size_t need = static_cast<size_t>(r.stride) * static_cast<size_t>(height);
  if (scratch.size() < need) scratch.resize(need);
  read_rows(scratch.data(), r.stride, height);
  r.data = scratch.data();
  return r;
}

// ---- detail::decode_scan_coefficients (a test seam) ----

namespace {

// Starts decompression of a header read_header_c read, as JpegRegionDecoder does
// (whole image, scale 1/denom), then installs `huffman` where it is given. *mcus and
// *blocks get the scan's MCU count and blocks per MCU. 1: decoded with one scan; 0:
// several scans (the seam decodes only single-scan files); -1: libjpeg refused the file.
int scan_start_c(jpeg_decompress_struct* cinfo, ErrorManager* err, int denom, bool grey,
                 int64_t max_pixels, detail::JpegHuffman* huffman, bool* taken, long* mcus,
                 int* blocks) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  if (int64_t{cinfo->image_width} * cinfo->image_height > max_pixels) {
    std::snprintf(err->message, sizeof(err->message), "%ux%u is over the limit of %lld pixels",
                  cinfo->image_width, cinfo->image_height, static_cast<long long>(max_pixels));
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  cinfo->out_color_space =
      grey || cinfo->jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_EXT_RGB;
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned int>(denom);
  jpeg_start_decompress(cinfo);
  if (cinfo->progressive_mode || cinfo->comps_in_scan != cinfo->num_components) {
    jpeg_abort_decompress(cinfo);
    return 0;
  }
  *taken = huffman && huffman->install(cinfo, huffman_fallback);
  *mcus = static_cast<long>(cinfo->MCUs_per_row) * static_cast<long>(cinfo->MCU_rows_in_scan);
  *blocks = cinfo->blocks_in_MCU;
  return 1;
}

// Calls the entropy decoder for every MCU, as libjpeg's coefficient controller does
// (a zeroed buffer each time; none while skipping). 0: done; kNeedsLibjpeg: handed
// back; -1: an error.
int scan_decode_c(jpeg_decompress_struct* cinfo, ErrorManager* err, long mcus, long skip,
                  int blocks, JCOEF* out) {
  if (int rc = setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return rc == kNeedsLibjpeg ? kNeedsLibjpeg : -1;
  }
  JBLOCK buffer[D_MAX_BLOCKS_IN_MCU];
  JBLOCKROW rows[D_MAX_BLOCKS_IN_MCU];
  for (int i = 0; i < D_MAX_BLOCKS_IN_MCU; ++i) rows[i] = &buffer[i];
  auto* entropy = reinterpret_cast<detail::JpegEntropyDecoder*>(cinfo->entropy);
  for (long m = 0; m < mcus; ++m) {
    std::memset(buffer, 0, sizeof(buffer));
    if (!entropy->decode_mcu(cinfo, m < skip ? nullptr : rows)) {  // suspended: not with
      std::snprintf(err->message, sizeof(err->message), "suspended at MCU %ld", m);  // memory
      jpeg_abort_decompress(cinfo);
      return -1;
    }
    if (m >= skip)
      std::memcpy(out + (m - skip) * blocks * DCTSIZE2, buffer, sizeof(JBLOCK) * blocks);
  }
  jpeg_abort_decompress(cinfo);
  return 0;
}

}  // namespace

namespace detail {

ScanCoefficients decode_scan_coefficients(std::string_view bytes, bool fast, int scale_denom,
                                          bool grey, long skip_mcus, int64_t max_pixels) {
  using Outcome = ScanCoefficients::Outcome;
  ScanCoefficients result;
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  err.strict = false;
  jpeg_create_decompress(&cinfo);
  JpegHuffman huffman;
  bool taken = false;
  long mcus = 0;
  int blocks = 0;
  const int started =
      read_header_c(&cinfo, &err, reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size()) != 0
          ? -1
          : scan_start_c(&cinfo, &err, scale_denom, grey, max_pixels, fast ? &huffman : nullptr,
                         &taken, &mcus, &blocks);
  if (started == 1 && fast && !taken) {
    jpeg_abort_decompress(&cinfo);
    result.outcome = Outcome::kNotTaken;
  } else if (started == 1) {
    const long stored = std::max(0L, mcus - skip_mcus);
    result.blocks.assign(static_cast<size_t>(stored) * blocks * DCTSIZE2, 0);
    const int rc = scan_decode_c(&cinfo, &err, mcus, skip_mcus, blocks, result.blocks.data());
    result.outcome = rc == 0               ? Outcome::kDecoded
                     : rc == kNeedsLibjpeg ? Outcome::kHandedBack
                                           : Outcome::kError;
  } else {
    result.outcome = started == 0 ? Outcome::kNotTaken : Outcome::kError;
  }
  if (result.outcome != Outcome::kDecoded) result.blocks.clear();
  result.warnings = err.warnings;
  result.message = err.message;
  jpeg_destroy_decompress(&cinfo);
  return result;
}

}  // namespace detail

namespace {

// The self-test's JPEGs: one per chroma layout, low to high quality, odd sizes, the
// left half a gradient (short codes) and the right half noise (long codes, large
// values, many 0xFF bytes in the scan), made with TurboJPEG.
std::vector<std::string> self_test_jpegs() {
  struct Case {
    int width, height, subsamp, quality;
  };
  constexpr Case kCases[] = {{48, 32, TJSAMP_420, 90},
                             {37, 23, TJSAMP_422, 75},
                             {33, 17, TJSAMP_444, 100},
                             {40, 24, TJSAMP_GRAY, 50},
                             {24, 40, TJSAMP_440, 95}};
  std::vector<std::string> out;
  uint32_t state = 12345;
  for (const Case& c : kCases) {
    std::vector<unsigned char> rgb(static_cast<size_t>(c.width) * c.height * 3);
    for (int y = 0; y < c.height; ++y)
      for (int x = 0; x < c.width; ++x)
        for (int ch = 0; ch < 3; ++ch) {
          state = state * 1664525u + 1013904223u;
          rgb[(static_cast<size_t>(y) * c.width + x) * 3 + ch] = static_cast<unsigned char>(
              x < c.width / 2 ? (x * 7 + y * 5 + ch * 60) & 0xff : state >> 24);
        }
    unsigned char* jpeg = nullptr;
    unsigned long size = 0;
    if (tjCompress2(thread_compressor(), rgb.data(), c.width, c.width * 3, c.height, TJPF_RGB,
                    &jpeg, &size, c.subsamp, c.quality, 0) == 0)
      out.emplace_back(reinterpret_cast<const char*>(jpeg), size);
    if (jpeg) tjFree(jpeg);
  }
  return out;
}

}  // namespace

namespace detail {

bool run_jpeg_huffman_self_test(bool inject_mismatch) {
  std::string difference;
  try {
    const std::vector<std::string> jpegs = self_test_jpegs();
    if (jpegs.size() != 5) difference = "TurboJPEG could not make the test images";
    for (size_t i = 0; i < jpegs.size() && difference.empty(); ++i) {
      ScanCoefficients fast = decode_scan_coefficients(jpegs[i], true);
      const ScanCoefficients lib = decode_scan_coefficients(jpegs[i], false);
      if (inject_mismatch && !fast.blocks.empty()) fast.blocks[fast.blocks.size() / 2] += 1;
      const std::string which =
          "image " + std::to_string(i + 1) + " of " + std::to_string(jpegs.size()) + ": ";
      if (fast.outcome != ScanCoefficients::Outcome::kDecoded ||
          lib.outcome != ScanCoefficients::Outcome::kDecoded)
        difference = which + "decoded by dataecho " +
                     (fast.outcome == lib.outcome ? "and" : "but not") +
                     " by libjpeg, or by neither";
      else if (fast.warnings != lib.warnings)
        difference = which + "libjpeg warned (" + lib.message + ")";
      else if (fast.blocks != lib.blocks)
        difference = which + "the coefficients differ";
    }
  } catch (const std::exception& e) {
    difference = e.what();
  }
  if (difference.empty()) return true;
  self_test_failed = true;
  if (!self_test_said.exchange(true))
    std::fprintf(stderr,
                 "dataecho: the JPEG Huffman decoder's self-test found a difference from this "
                 "process's libjpeg (%s); JPEGs are decoded with libjpeg's own Huffman decoder\n",
                 difference.c_str());
  return false;
}

}  // namespace detail
}  // namespace dataecho
