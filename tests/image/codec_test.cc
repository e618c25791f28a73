// Decoders against the reference decoders (libpng, libjpeg's scanline API), the region
// decoder against whole-image decodes, and bad bytes against crashes.
#include <gtest/gtest.h>

#include <csetjmp>
#include <cstdio>

// clang-format off
#include <jpeglib.h>
#include <png.h>
// clang-format on

#include "dataecho/image/codec.h"
#include "dataecho/image/transforms.h"
#include "image_test_util.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::at;
using testing::coordinate_image;
using testing::error_of;
using testing::psnr;
using testing::synthetic_image;

std::string_view view(const std::string& s) { return s; }

// ---- reference decoders ----

// libpng's simplified API, into `format` (PNG_FORMAT_RGB, _GRAY, _RGBA...).
std::vector<uint8_t> libpng_decode(const std::string& bytes, uint32_t format, int* w, int* h) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) << img.message;
  img.format = format;
  std::vector<uint8_t> out(PNG_IMAGE_SIZE(img));
  EXPECT_TRUE(png_image_finish_read(&img, nullptr, out.data(), 0, nullptr)) << img.message;
  *w = static_cast<int>(img.width);
  *h = static_cast<int>(img.height);
  return out;
}

std::string libpng_encode(const std::vector<uint8_t>& pixels, int w, int h, uint32_t format,
                          const std::vector<uint8_t>* colormap = nullptr, int colors = 0) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = format;
  img.colormap_entries = static_cast<png_uint_32>(colors);
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, pixels.data(), 0,
                                        colormap ? colormap->data() : nullptr));
  std::string out(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, pixels.data(), 0,
                                        colormap ? colormap->data() : nullptr))
      << img.message;
  out.resize(size);
  return out;
}

struct JpegErr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

// libjpeg's scanline API with its default settings: a different path into libjpeg-turbo
// than TurboJPEG's tjDecompress2.
bool libjpeg_decode(const std::string& bytes, J_COLOR_SPACE space, std::vector<uint8_t>& out,
                    int* w, int* h, int* c) {
  jpeg_decompress_struct cinfo;
  JpegErr err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = [](j_common_ptr ci) {
    std::longjmp(reinterpret_cast<JpegErr*>(ci->err)->jump, 1);
  };
  jpeg_create_decompress(&cinfo);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = space;
  jpeg_start_decompress(&cinfo);
  *w = static_cast<int>(cinfo.output_width);
  *h = static_cast<int>(cinfo.output_height);
  *c = cinfo.output_components;
  out.resize(static_cast<size_t>(*w) * *h * *c);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.data() + static_cast<size_t>(cinfo.output_scanline) * *w * *c;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

std::vector<uint8_t> pixels(const Tensor& t) {
  const uint8_t* p = t.data<uint8_t>();
  return {p, p + t.num_elements()};
}

// ---- PNG ----

TEST(Png, RoundTripMatchesLibpng) {
  for (int channels : {1, 3}) {
    Tensor img = synthetic_image(37, 53, channels, 5);
    std::string png = encode_png(img);
    EXPECT_EQ(sniff_image_format(png), ImageFormat::kPng);
    Tensor dec = decode_image(png);
    ASSERT_EQ(dec.shape(), (Shape{37, 53, channels}));
    EXPECT_TRUE(dec.equals(img)) << "PNG is lossless";
    int w = 0, h = 0;
    auto ref = libpng_decode(png, channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB, &w, &h);
    EXPECT_EQ(w, 53);
    EXPECT_EQ(h, 37);
    EXPECT_EQ(pixels(dec), ref);
  }
}

TEST(Png, LibpngWrittenFilesDecodeLikeLibpng) {
  const int w = 19, h = 11;
  // RGBA: alpha is dropped.
  std::vector<uint8_t> rgba(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = static_cast<uint8_t>(i * 37 + 11);
  std::string png = libpng_encode(rgba, w, h, PNG_FORMAT_RGBA);
  Tensor dec = decode_image(png);
  ASSERT_EQ(dec.shape(), (Shape{h, w, 3}));
  for (int i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(dec.data<uint8_t>()[i * 3 + c], rgba[i * 4 + c]);
  EXPECT_EQ(read_image_info(png).channels, 3);

  // Grey + alpha: one channel as stored.
  std::vector<uint8_t> ga(static_cast<size_t>(w) * h * 2);
  for (size_t i = 0; i < ga.size(); ++i) ga[i] = static_cast<uint8_t>(i * 13 + 1);
  Tensor g = decode_image(libpng_encode(ga, w, h, PNG_FORMAT_GA));
  ASSERT_EQ(g.shape(), (Shape{h, w, 1}));
  for (int i = 0; i < w * h; ++i) ASSERT_EQ(g.data<uint8_t>()[i], ga[i * 2]);

  // Palette: expanded to RGB, as libpng expands it.
  std::vector<uint8_t> cmap = {0, 0, 0, 255, 0, 0, 0, 255, 0, 10, 20, 30};
  std::vector<uint8_t> idx(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<uint8_t>(i % 4);
  std::string pal = libpng_encode(idx, w, h, PNG_FORMAT_RGB_COLORMAP, &cmap, 4);
  int rw = 0, rh = 0;
  EXPECT_EQ(pixels(decode_image(pal)), libpng_decode(pal, PNG_FORMAT_RGB, &rw, &rh));
}

TEST(Png, ChannelConversion) {
  Tensor rgb = synthetic_image(8, 9, 3, 2);
  std::string png = encode_png(rgb);
  DecodeOptions grey;
  grey.channels = 1;
  Tensor g = decode_image(png, grey);
  ASSERT_EQ(g.shape(), (Shape{8, 9, 1}));
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 9; ++x) {
      double luma = 0.299 * at(rgb, y, x, 0) + 0.587 * at(rgb, y, x, 1) + 0.114 * at(rgb, y, x, 2);
      EXPECT_NEAR(at(g, y, x, 0), luma, 1.0);
    }
  DecodeOptions three;
  three.channels = 3;
  Tensor back = decode_image(encode_png(g), three);
  ASSERT_EQ(back.shape(), (Shape{8, 9, 3}));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(at(back, 3, 4, c), at(g, 3, 4, 0));
}

// ---- JPEG ----

TEST(Jpeg, DecodeMatchesLibjpegScanlinesExactly) {
  for (int channels : {1, 3}) {
    Tensor img = synthetic_image(67, 101, channels, 9);
    std::string jpg = encode_jpeg(img, 90);
    EXPECT_EQ(sniff_image_format(jpg), ImageFormat::kJpeg);
    Tensor dec = decode_image(jpg);
    ASSERT_EQ(dec.shape(), (Shape{67, 101, channels}));
    std::vector<uint8_t> ref;
    int w = 0, h = 0, c = 0;
    ASSERT_TRUE(libjpeg_decode(jpg, channels == 1 ? JCS_GRAYSCALE : JCS_RGB, ref, &w, &h, &c));
    ASSERT_EQ(c, channels);
    EXPECT_EQ(pixels(dec), ref);
    EXPECT_GT(psnr(dec, img), 30.0) << "channels " << channels;
  }
}

TEST(Jpeg, GreyFromColourMatchesLibjpeg) {
  std::string jpg = encode_jpeg(synthetic_image(40, 30, 3, 4), 85);
  DecodeOptions grey;
  grey.channels = 1;
  Tensor g = decode_image(jpg, grey);
  std::vector<uint8_t> ref;
  int w = 0, h = 0, c = 0;
  ASSERT_TRUE(libjpeg_decode(jpg, JCS_GRAYSCALE, ref, &w, &h, &c));
  EXPECT_EQ(g.shape(), (Shape{40, 30, 1}));
  EXPECT_EQ(pixels(g), ref);
  EXPECT_EQ(read_image_info(jpg).channels, 3);
  EXPECT_EQ(read_image_info(jpg).width, 30);
}

TEST(Jpeg, RegionDecodeEqualsWholeImageDecode) {
  for (int channels : {1, 3}) {
    Tensor img = synthetic_image(197, 231, channels, 3);
    std::string jpg = encode_jpeg(img, 90);
    // The whole image with libjpeg's own Huffman decoder, the regions with dataecho's.
    DecodeOptions reference;
    reference.fast_huffman = false;
    Tensor full = decode_jpeg(jpg, reference);
    Rng rng(11);
    std::vector<uint8_t> scratch;
    for (int trial = 0; trial < 300; ++trial) {
      int h = 1 + static_cast<int>(rng.uniform(197)), w = 1 + static_cast<int>(rng.uniform(231));
      int y = static_cast<int>(rng.uniform(198 - h)), x = static_cast<int>(rng.uniform(232 - w));
      JpegRegionDecoder& dec = JpegRegionDecoder::thread_decoder();
      ImageInfo info = dec.read_header(jpg);
      ASSERT_EQ(info.width, 231);
      DecodedRegion r = dec.decode(y, x, h, w, scratch);
      ASSERT_LE(r.x, x);
      ASSERT_GE(r.x + r.width, x + w);
      ASSERT_EQ(r.y, y);
      ASSERT_EQ(r.channels, channels);
      for (int yy = 0; yy < h; ++yy)
        for (int xx = x; xx < x + w; ++xx)
          for (int c = 0; c < channels; ++c)
            ASSERT_EQ(r.data[yy * r.stride + (xx - r.x) * channels + c], at(full, y + yy, xx, c))
                << "region " << w << "x" << h << "+" << x << "+" << y << " at " << xx << ","
                << y + yy;
    }
  }
}

// The streaming interface returns the same rows as decode(), in whatever chunks they
// are asked for; a region abandoned half way (finish(), or a new read_header()) leaves
// the decoder ready for the next image.
TEST(Jpeg, StreamedRegionEqualsDecodedRegionAndCanBeAbandoned) {
  std::string jpg = encode_jpeg(synthetic_image(120, 90, 3, 5), 90);
  std::string other = encode_jpeg(synthetic_image(40, 50, 3, 6), 90);
  JpegRegionDecoder& dec = JpegRegionDecoder::thread_decoder();
  std::vector<uint8_t> scratch;
  dec.read_header(jpg);
  DecodedRegion whole = dec.decode(17, 11, 70, 40, scratch);
  const std::vector<uint8_t> want(scratch.begin(), scratch.begin() + whole.stride * whole.height);
  for (int chunk : {1, 5, 16, 70}) {
    dec.read_header(jpg);
    DecodedRegion r = dec.start(17, 11, 70, 40);
    EXPECT_EQ(r.data, nullptr);
    ASSERT_EQ(r.x, whole.x);
    ASSERT_EQ(r.stride, whole.stride);
    std::vector<uint8_t> got(static_cast<size_t>(r.stride) * r.height);
    int rows = 0;
    while (int n = dec.read_rows(got.data() + rows * r.stride, r.stride, chunk)) {
      EXPECT_LE(n, chunk);
      rows += n;
    }
    EXPECT_EQ(rows, 70);
    EXPECT_EQ(got, want) << "chunk " << chunk;
  }
  // Abandoned after a few rows, by finish() and by the next read_header().
  std::vector<uint8_t> buf(static_cast<size_t>(whole.stride) * 8);
  dec.read_header(jpg);
  DecodedRegion r = dec.start(17, 11, 70, 40);
  EXPECT_EQ(dec.read_rows(buf.data(), r.stride, 8), 8);
  dec.finish();
  EXPECT_NE(error_of([&] { dec.read_rows(buf.data(), r.stride, 8); }).find("without start"),
            std::string::npos);
  dec.read_header(jpg);
  r = dec.start(0, 0, 120, 90);
  EXPECT_EQ(dec.read_rows(buf.data(), r.stride, 3), 3);
  ImageInfo info = dec.read_header(other);
  EXPECT_EQ(info.width, 50);
  DecodedRegion o = dec.decode(0, 0, 40, 50, scratch);
  Tensor full = decode_jpeg(other);
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 50; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(o.data[y * o.stride + (x - o.x) * 3 + c], at(full, y, x, c));
}

// A corrupt JPEG met half way through a streamed decode_augment is an error, and the
// thread's decoder decodes the next image correctly.
TEST(Jpeg, CorruptDataMidRegionIsAnErrorAndTheDecoderRecovers) {
  std::string jpg = encode_jpeg(synthetic_image(128, 128, 3, 9), 90);
  std::string cut = jpg.substr(0, jpg.size() * 3 / 4);
  AugmentOptions o;
  o.resize_height = o.resize_width = 64;
  o.normalize = NormalizeOptions{};
  Rng a(3), b(3);
  std::string msg = error_of([&] { decode_augment(cut, {}, o, a); });
  EXPECT_NE(msg.find("corrupt JPEG data"), std::string::npos) << msg;
  Tensor fused = decode_augment(jpg, {}, o, a);
  Tensor ref = augment(decode_image(jpg), o, b);
  EXPECT_TRUE(fused.equals(ref));
}

// A JPEG with its DQT segments cut out: the header refers to quantization tables it
// never defines.
std::string without_quant_tables(const std::string& jpg) {
  std::string out = jpg.substr(0, 2);  // SOI
  size_t i = 2;
  while (i + 4 <= jpg.size() && static_cast<uint8_t>(jpg[i]) == 0xff) {
    const auto marker = static_cast<uint8_t>(jpg[i + 1]);
    const size_t len = (static_cast<uint8_t>(jpg[i + 2]) << 8) | static_cast<uint8_t>(jpg[i + 3]);
    if (marker == 0xda) break;  // SOS: the rest is the scan
    if (marker != 0xdb) out += jpg.substr(i, 2 + len);
    i += 2 + len;
  }
  EXPECT_LT(out.size() + 64, jpg.size()) << "no DQT found";
  return out + jpg.substr(i);
}

// libjpeg keeps the tables of the last image in its decompressor, for abbreviated
// datastreams; a per-thread decompressor then decoded a JPEG that lacks its tables with
// the previous image's, silently (found by fuzz/image_decode_fuzz.cc). Each image must
// be decoded on its own.
TEST(Jpeg, MissingTablesAreAnErrorNotThePreviousImagesTables) {
  const std::string coarse = encode_jpeg(synthetic_image(32, 32, 3, 4), 5);
  const std::string broken = without_quant_tables(encode_jpeg(synthetic_image(32, 32, 3, 5), 95));
  AugmentOptions o;
  o.resize_height = o.resize_width = 16;
  for (int round = 0; round < 2; ++round) {  // after a good image, and after the error
    decode_image(coarse);
    std::string msg = error_of([&] { decode_image(broken); });
    EXPECT_NE(msg.find("Quantization table"), std::string::npos) << msg;
    Rng rng(1);
    decode_augment(coarse, {}, o, rng);
    msg = error_of([&] { decode_augment(broken, {}, o, rng); });
    EXPECT_NE(msg.find("Quantization table"), std::string::npos) << msg;
  }
}

// ---- bad bytes ----

TEST(Decode, UnknownBytesNameTheFirstBytes) {
  std::string junk("\x00\x01\x02\x03\x04", 5);
  std::string msg = error_of([&] { decode_image(junk); });
  EXPECT_NE(msg.find("decode_image: not a JPEG or PNG (first bytes 00 01 02 03"), std::string::npos)
      << msg;
  EXPECT_NE(error_of([] { decode_image(""); }).find("no bytes"), std::string::npos);
}

TEST(Decode, TruncatedJpegIsAnErrorUnlessLenient) {
  std::string jpg = encode_jpeg(synthetic_image(64, 64, 3), 90);
  std::string cut = jpg.substr(0, jpg.size() / 2);
  std::string msg = error_of([&] { decode_image(cut); });
  EXPECT_NE(msg.find("corrupt JPEG data"), std::string::npos) << msg;
  DecodeOptions lenient;
  lenient.strict = false;
  EXPECT_EQ(decode_image(cut, lenient).shape(), (Shape{64, 64, 3}));
  // The region decoder says the same.
  AugmentOptions o;
  o.random_resized_crop = RandomResizedCropOptions{};
  Rng rng(1);
  EXPECT_NE(error_of([&] { decode_augment(cut, {}, o, rng); }).find("corrupt JPEG data"),
            std::string::npos);
  // Only a header's worth of bytes.
  EXPECT_NE(error_of([&] { decode_image(jpg.substr(0, 20)); }).find("JPEG"), std::string::npos);
}

TEST(Decode, CorruptPngIsAnError) {
  std::string png = encode_png(synthetic_image(32, 32, 3));
  std::string cut = png.substr(0, png.size() - 30);
  EXPECT_NE(error_of([&] { decode_image(cut); }).find("bad PNG"), std::string::npos);
  std::string flipped = png;
  flipped[png.size() / 2] ^= 0x55;  // inside IDAT: its CRC no longer matches
  std::string msg = error_of([&] { decode_image(flipped); });
  EXPECT_NE(msg.find("bad PNG"), std::string::npos) << msg;
}

TEST(Decode, HugeHeaderIsRefusedBeforeAllocating) {
  std::string png = encode_png(synthetic_image(4, 4, 1));
  DecodeOptions small;
  small.max_pixels = 10;
  EXPECT_NE(error_of([&] { decode_image(png, small); }).find("limit 10 pixels"), std::string::npos);
}

// Mutated and truncated images: each either decodes or throws dataecho::Error.
TEST(Decode, MutationsNeverCrash) {
  std::vector<std::string> seeds = {
      encode_jpeg(synthetic_image(48, 40, 3), 80), encode_jpeg(synthetic_image(16, 24, 1), 60),
      encode_png(synthetic_image(20, 20, 3)), encode_png(synthetic_image(9, 7, 1))};
  Rng rng(123);
  AugmentOptions o;
  o.random_resized_crop = RandomResizedCropOptions{};
  o.random_resized_crop->height = o.random_resized_crop->width = 16;
  o.flip_probability = 0.5;
  o.normalize = NormalizeOptions{};
  int errors = 0, ok = 0;
  for (int i = 0; i < 600; ++i) {
    std::string b = seeds[i % seeds.size()];
    const int flips = 1 + static_cast<int>(rng.uniform(8));
    for (int f = 0; f < flips; ++f) b[rng.uniform(b.size())] = static_cast<char>(rng.uniform(256));
    if (rng.bernoulli(0.3)) b.resize(rng.uniform(b.size()));
    for (bool fused : {false, true}) {
      try {
        if (fused) {
          Rng r(i);
          decode_augment(b, {}, o, r);
        } else {
          decode_image(b);
        }
        ++ok;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_EQ(ok + errors, 1200);
}

TEST(Encode, RefusesWrongInput) {
  Tensor f = Tensor::from_vector<float>({1, 2, 3}, {1, 1, 3});
  EXPECT_NE(error_of([&] { encode_png(f); }).find("uint8"), std::string::npos);
  EXPECT_NE(error_of([&] { encode_jpeg(synthetic_image(2, 2, 3), 0); }).find("quality"),
            std::string::npos);
}

TEST(Sniff, Formats) {
  EXPECT_EQ(sniff_image_format(view(std::string("\xff\xd8\xff\xe0", 4))), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(view(std::string("\x89PNG\r\n\x1a\n", 8))), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format("GIF89a"), ImageFormat::kUnknown);
  EXPECT_STREQ(image_format_name(ImageFormat::kPng), "png");
}

}  // namespace
}  // namespace dataecho
