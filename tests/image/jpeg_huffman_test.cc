// The faster Huffman decoder (src/image/jpeg_huffman.h) against libjpeg-turbo's own: the
// same pixels for every layout, table, quality and scale it takes; the scans it must
// leave to libjpeg left; and corrupt or truncated data treated exactly as libjpeg treats
// it (the same error, or with strict off the same repaired pixels).
#include <gtest/gtest.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>
// clang-format on

#include "dataecho/core/error.h"
#include "dataecho/core/rng.h"
#include "dataecho/image/codec.h"
#include "image/image_decode_check.h"
#include "image/jpeg_huffman.h"
#include "image/jpeg_huffman_check.h"
#include "image_test_util.h"

namespace dataecho {
namespace {

using testing::synthetic_image;

// Pixels that are hard to compress: large coefficients, long codes, many 0xFF bytes
// in the scan (byte stuffing).
Tensor noise_image(int height, int width, int channels, uint64_t seed) {
  Rng rng(seed);
  return Tensor::make(DType::kUInt8, {height, width, channels}, [&](std::byte* b) {
    for (int64_t i = 0; i < int64_t{height} * width * channels; ++i)
      b[i] = static_cast<std::byte>(rng.uniform(256));
  });
}

struct Layout {
  const char* name;
  int h_samp = 2, v_samp = 2;  // luma sampling (chroma is 1x1)
  int quality = 90;
  bool optimize = false;  // Huffman tables fitted to the image instead of the standard ones
  bool progressive = false;
  int restart_rows = 0;
};

// libjpeg's compressor, for the layouts TurboJPEG's tjCompress2 does not offer.
std::string libjpeg_encode(const Tensor& img, const Layout& l) {
  const int h = static_cast<int>(img.shape()[0]), w = static_cast<int>(img.shape()[1]);
  const int c = static_cast<int>(img.shape()[2]);
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = c;
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, l.quality, TRUE);
  if (c == 3) {
    cinfo.comp_info[0].h_samp_factor = l.h_samp;
    cinfo.comp_info[0].v_samp_factor = l.v_samp;
  }
  cinfo.optimize_coding = l.optimize ? TRUE : FALSE;
  cinfo.restart_in_rows = l.restart_rows;
  if (l.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  const auto* px = img.data<uint8_t>();
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(px) + static_cast<size_t>(cinfo.next_scanline) * w * c;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buf), size);
  std::free(buf);
  jpeg_destroy_compress(&cinfo);
  return out;
}

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"4:2:0 q90", 2, 2, 90},
      {"4:4:4 q100", 1, 1, 100},  // the largest values: many codes past the fast table
      {"4:2:2 q75", 2, 1, 75},
      {"4:4:0 q95", 1, 2, 95},
      {"4:1:1 q50", 4, 1, 50},
      {"4:2:0 q90 fitted tables", 2, 2, 90, true},
      {"4:4:4 q20 fitted tables", 1, 1, 20, true},
  };
  return all;
}

// What one region decode gave: its error, or its rows.
struct Outcome {
  std::string error;
  std::vector<uint8_t> pixels;
  bool operator==(const Outcome&) const = default;
};
void PrintTo(const Outcome& o, std::ostream* os) {
  *os << (o.error.empty() ? "pixels" : o.error) << " (" << o.pixels.size() << " bytes)";
}

// A random region of `jpg` (at 1/denom scale), read in chunks of random height, with
// the faster Huffman decoder or libjpeg's.
Outcome region(const std::string& jpg, bool fast, int denom, int channels, bool strict,
               uint64_t seed) {
  Outcome o;
  try {
    JpegRegionDecoder& d = JpegRegionDecoder::thread_decoder();
    DecodeOptions opt;
    opt.channels = channels;
    opt.strict = strict;
    opt.fast_huffman = fast;
    ImageInfo info = d.read_header(jpg, opt);
    auto [ih, iw] = denom == 1 ? std::pair{info.height, info.width} : d.scale_down(denom);
    Rng rng(seed);
    const int h = 1 + static_cast<int>(rng.uniform(ih)), w = 1 + static_cast<int>(rng.uniform(iw));
    const int y = static_cast<int>(rng.uniform(ih - h + 1));
    const int x = static_cast<int>(rng.uniform(iw - w + 1));
    DecodedRegion r = d.start(y, x, h, w);
    o.pixels.resize(static_cast<size_t>(r.stride) * h);
    for (int row = 0; row < h;)
      row += d.read_rows(o.pixels.data() + static_cast<size_t>(row) * r.stride, r.stride,
                         1 + static_cast<int>(rng.uniform(24)));
  } catch (const Error& e) {
    o.error = e.what();
    o.pixels.clear();  // rows read before an error are not promised
  }
  return o;
}

// libjpeg's scanline API on the whole image, with the faster decoder installed or not.
// Sets *installed to what install() said.
std::vector<uint8_t> whole(const std::string& jpg, bool fast, bool* installed) {
  struct Err {
    jpeg_error_mgr pub;
    std::jmp_buf jump;
  };
  static thread_local Err* current = nullptr;
  jpeg_decompress_struct cinfo{};  // client_data too: install declines one already set
  Err err;
  current = &err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = [](j_common_ptr) { std::longjmp(current->jump, 1); };
  detail::JpegHuffman huffman;
  std::vector<uint8_t> out;
  jpeg_create_decompress(&cinfo);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    ADD_FAILURE() << "libjpeg error or fallback on valid data";
    return {};
  }
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(jpg.data()), jpg.size());
  jpeg_read_header(&cinfo, TRUE);
  jpeg_start_decompress(&cinfo);
  *installed =
      fast && huffman.install(&cinfo, [](j_decompress_ptr) { std::longjmp(current->jump, 2); });
  const size_t row = static_cast<size_t>(cinfo.output_width) * cinfo.output_components;
  out.resize(row * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW p = out.data() + row * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &p, 1);
  }
  jpeg_finish_decompress(&cinfo);  // reads on to EOI: the decoder left the source at its marker
  jpeg_destroy_decompress(&cinfo);
  return out;
}

TEST(JpegHuffman, TakesBaselineScansAndDecodesThemExactly) {
  std::vector<Layout> all = layouts();
  all.push_back({"progressive", 2, 2, 90, false, true});
  all.push_back({"restart markers", 2, 2, 90, false, false, 1});
  for (const Layout& l : all) {
    for (int channels : {1, 3}) {
      for (bool noise : {false, true}) {
        Tensor img =
            noise ? noise_image(61, 83, channels, 5) : synthetic_image(61, 83, channels, 5);
        const std::string jpg = libjpeg_encode(img, l);
        bool installed = false, native = false;
        const std::vector<uint8_t> fast = whole(jpg, true, &installed);
        const std::vector<uint8_t> ref = whole(jpg, false, &native);
        // Only baseline scans without restart markers are taken; the rest stay libjpeg's.
        EXPECT_EQ(installed, !l.progressive && l.restart_rows == 0) << l.name;
        EXPECT_EQ(fast, ref) << l.name << ", " << channels << " channels, noise " << noise;
      }
    }
  }
}

// Regions, streamed in chunks, at every scale (1/8 decodes only DC coefficients) and
// output channel count (grey from colour decodes no chroma coefficients): the same
// pixels as with libjpeg's decoder.
TEST(JpegHuffman, RegionsEqualLibjpegsAtEveryScale) {
  const long fallbacks = detail::jpeg_huffman_fallbacks();
  uint64_t seed = 0;
  for (const Layout& l : layouts()) {
    for (bool noise : {false, true}) {
      const Tensor img = noise ? noise_image(97, 131, 3, 8) : synthetic_image(97, 131, 3, 8);
      const std::string jpg = libjpeg_encode(img, l);
      for (int denom : {1, 2, 4, 8})
        for (int channels : {0, 1, 3})
          for (int trial = 0; trial < 6; ++trial, ++seed) {
            const Outcome fast = region(jpg, true, denom, channels, true, seed);
            ASSERT_EQ(fast.error, "") << l.name;
            ASSERT_EQ(fast, region(jpg, false, denom, channels, true, seed))
                << l.name << ", noise " << noise << ", 1/" << denom << ", " << channels
                << " channels, trial " << trial;
          }
    }
  }
  EXPECT_EQ(detail::jpeg_huffman_fallbacks(), fallbacks) << "valid data went to libjpeg";
}

// Damaged scans: bytes overwritten, or the file cut short. Whatever libjpeg's decoder
// does with one (an error naming the damage, a repaired image with strict off, or
// garbage it does not notice), decoding with the faster one does the same; where the
// faster one meets data it leaves to libjpeg, it hands over. A file cut short (no marker
// ends its scan) is left to libjpeg from the start.
TEST(JpegHuffman, DamagedDataGetsLibjpegsTreatment) {
  const std::vector<std::string> seeds = {
      libjpeg_encode(synthetic_image(64, 80, 3, 2), {"4:2:0", 2, 2, 90}),
      libjpeg_encode(noise_image(40, 56, 3, 3), {"4:4:4", 1, 1, 95}),
      libjpeg_encode(synthetic_image(48, 40, 1, 4), {"grey", 1, 1, 80, true})};
  Rng rng(99);
  const long fallbacks = detail::jpeg_huffman_fallbacks();
  int errors = 0, repaired = 0;
  for (int i = 0; i < 400; ++i) {
    std::string b = seeds[static_cast<size_t>(i) % seeds.size()];
    const size_t scan = b.size() / 3;  // well past the headers of these small files
    const bool cut = !rng.bernoulli(0.5);
    if (!cut) {
      for (int f = 1 + static_cast<int>(rng.uniform(4)); f > 0; --f)
        b[scan + rng.uniform(b.size() - scan)] = static_cast<char>(rng.uniform(256));
    } else {
      b.resize(scan + rng.uniform(b.size() - scan));
    }
    const bool strict = rng.bernoulli(0.5);
    const long scans = detail::jpeg_huffman_scans();
    const Outcome fast = region(b, true, 1, 0, strict, static_cast<uint64_t>(i));
    if (cut) {
      EXPECT_EQ(detail::jpeg_huffman_scans(), scans) << "case " << i << " was taken";
    }
    ASSERT_EQ(fast, region(b, false, 1, 0, strict, static_cast<uint64_t>(i)))
        << "case " << i << ", strict " << strict << ": " << fast.error;
    errors += !fast.error.empty();
    repaired += !strict && fast.error.empty();
  }
  EXPECT_GT(errors, 20);
  EXPECT_GT(repaired, 20);
  EXPECT_GT(detail::jpeg_huffman_fallbacks(), fallbacks + 10) << "the hand-over never ran";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::filesystem::path kRegressions =
    std::filesystem::path(DATAECHO_SOURCE_DIR) / "tests/image/data/jpeg_regressions";

std::string checked(const std::string& file, uint8_t option) {
  std::string input(1, static_cast<char>(option));
  input += file;
  return testing::check_jpeg_huffman(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

// A 37x23 4:2:2 baseline JPEG (a mutated thumbnail, found by fuzzing from outside) whose
// scan holds 0xFF 0xFF 0x00 and which no marker ends. libjpeg decodes it without a
// warning, but its fast path reads those bytes as a marker and leaves stray
// coefficients in one block (jpeg_huffman.cc, unstuff); dataecho's decoder used to
// decode it as the standard says, 142 of 2,553 values apart. It now leaves such scans to
// libjpeg.
TEST(JpegHuffmanRegressions, FillBytesBeforeAZeroGoToLibjpeg) {
  const std::string jpg = read_file(kRegressions / "jpeg_huffman_mismatch_1.jpg");
  ASSERT_EQ(jpg.size(), 3140u);
  for (const std::string& bytes : {jpg, jpg + "\xff\xd9"}) {  // also with a marker at the end
    using O = detail::ScanCoefficients::Outcome;
    EXPECT_EQ(detail::decode_scan_coefficients(bytes, true).outcome, O::kNotTaken);
    EXPECT_EQ(detail::decode_scan_coefficients(bytes, false).outcome, O::kDecoded);
    for (uint8_t option : {0, 1, 3, 4, 8})
      EXPECT_EQ(checked(bytes, option), "") << "option " << int{option};
    for (bool strict : {true, false}) {
      DecodeOptions o;
      o.strict = strict;
      const Tensor fast = decode_image(bytes, o);
      o.fast_huffman = false;
      const Tensor lib = decode_image(bytes, o);
      ASSERT_EQ(fast.nbytes(), 37u * 23 * 3);
      EXPECT_EQ(std::memcmp(fast.raw_data(), lib.raw_data(), fast.nbytes()), 0);
    }
  }
}

// The same bytes as an input of fuzz/image_decode_fuzz (strict, native channels,
// augment pick 2): decode_augment equals augment(decode_image).
TEST(JpegHuffmanRegressions, ImageDecodeFuzzInputPasses) {
  const std::string input = read_file(kRegressions / "jpeg_huffman_mismatch_1.fuzz");
  ASSERT_EQ(input.size(), 3142u);
  EXPECT_EQ(
      testing::check_image_decode(reinterpret_cast<const uint8_t*>(input.data()), input.size()),
      "");
}

// A truncated 37x23 JPEG (395 bytes) whose data holds every MCU's bits: libjpeg's
// decoder reads ahead to the end of the file and warns ("Premature end of JPEG file"),
// an error in strict mode; dataecho's decoded it without one. A scan that no marker
// ends now goes to libjpeg.
TEST(JpegHuffmanRegressions, TruncatedFileIsAnErrorInStrictMode) {
  const std::string jpg = read_file(kRegressions / "jpeg_huffman_strict_2.jpg");
  ASSERT_EQ(jpg.size(), 395u);
  for (bool fast : {true, false}) {
    DecodeOptions o;
    o.fast_huffman = fast;
    try {
      decode_image(jpg, o);
      ADD_FAILURE() << "strict decode succeeded, fast " << fast;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("Premature end of JPEG file"), std::string::npos)
          << e.what();
    }
    o.strict = false;
    EXPECT_EQ(decode_image(jpg, o).shape(), (Shape{23, 37, 3}));
  }
  for (uint8_t option : {0, 2, 4, 16}) EXPECT_EQ(checked(jpg, option), "");
}

// The seed corpus (fuzz/corpus/jpeg_huffman, made by scripts/make_jpeg_corpus.py from
// several encoders and settings), each file with its own option byte and with the
// scale and grey options varied: both promises of jpeg_huffman_check.h hold.
TEST(JpegHuffmanCorpus, EveryFileAgrees) {
  const std::filesystem::path dir =
      std::filesystem::path(DATAECHO_SOURCE_DIR) / "fuzz/corpus/jpeg_huffman";
  int files = 0, taken = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string input = read_file(entry.path());
    if (input.empty()) continue;
    ++files;
    const std::string jpg = input.substr(1);
    taken += detail::decode_scan_coefficients(jpg, true).outcome ==
             detail::ScanCoefficients::Outcome::kDecoded;
    for (int option : {static_cast<int>(static_cast<uint8_t>(input[0])), 0, 1, 3, 4, 5, 0x18})
      EXPECT_EQ(checked(jpg, static_cast<uint8_t>(option)), "")
          << entry.path().filename() << ", option " << option;
  }
  EXPECT_GE(files, 100);
  EXPECT_GE(taken, files / 2) << "most of the corpus should be scans the fast decoder takes";
}

// The start-up self-test passes with this libjpeg; a mismatch turns the fast path off
// for the process, says so once on standard error, and decoding goes on with libjpeg's
// decoder.
TEST(JpegHuffman, SelfTestMismatchTurnsTheFastPathOff) {
  ASSERT_EQ(detail::fast_huffman_status(), detail::FastHuffmanStatus::kOn);
  EXPECT_TRUE(detail::run_jpeg_huffman_self_test());
  const std::string jpg = libjpeg_encode(synthetic_image(32, 40, 3, 1), {"4:2:0"});
  long scans = detail::jpeg_huffman_scans();
  const Tensor before = decode_image(jpg);
  EXPECT_EQ(detail::jpeg_huffman_scans(), scans + 1);

  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(detail::run_jpeg_huffman_self_test(true));
  EXPECT_FALSE(detail::run_jpeg_huffman_self_test(true));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("self-test found a difference"), std::string::npos) << said;
  EXPECT_EQ(said.find("self-test", said.find("self-test") + 1), std::string::npos)
      << "said more than once: " << said;
  EXPECT_EQ(detail::fast_huffman_status(), detail::FastHuffmanStatus::kOffBySelfTest);
  scans = detail::jpeg_huffman_scans();
  const Tensor after = decode_image(jpg);
  EXPECT_EQ(detail::jpeg_huffman_scans(), scans) << "the fast path still ran";
  EXPECT_EQ(std::memcmp(before.raw_data(), after.raw_data(), before.nbytes()), 0);

  detail::reset_jpeg_huffman_self_test();
  EXPECT_EQ(detail::fast_huffman_status(), detail::FastHuffmanStatus::kOn);
}

// DecodeOptions::fast_huffman (the spec's "fast_huffman") turns the fast path off for
// one decode, with the same pixels.
TEST(JpegHuffman, OptionTurnsTheFastPathOffForOneDecode) {
  const std::string jpg = libjpeg_encode(noise_image(40, 48, 3, 2), {"4:4:4", 1, 1, 95});
  DecodeOptions o;
  long scans = detail::jpeg_huffman_scans();
  const Tensor fast = decode_image(jpg, o);
  EXPECT_EQ(detail::jpeg_huffman_scans(), scans + 1);
  o.fast_huffman = false;
  const Tensor lib = decode_image(jpg, o);
  EXPECT_EQ(detail::jpeg_huffman_scans(), scans + 1);
  EXPECT_EQ(std::memcmp(fast.raw_data(), lib.raw_data(), fast.nbytes()), 0);
}

// install() leaves a decompressor whose client_data the caller uses alone.
TEST(JpegHuffman, InstallDeclinesAClientDataItDoesNotOwn) {
  const std::string jpg = libjpeg_encode(synthetic_image(16, 16, 3, 1), {"4:2:0"});
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  int mine = 7;
  cinfo.client_data = &mine;
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(jpg.data()), jpg.size());
  jpeg_read_header(&cinfo, TRUE);
  jpeg_start_decompress(&cinfo);
  detail::JpegHuffman huffman;
  EXPECT_FALSE(huffman.install(&cinfo, [](j_decompress_ptr) { std::abort(); }));
  EXPECT_EQ(cinfo.client_data, &mine);
  jpeg_abort_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
}

}  // namespace
}  // namespace dataecho
