// Internal: a faster Huffman decoder for baseline JPEG scans, in place of libjpeg-turbo's.
//
// Huffman decoding is most of a JPEG decode: on the photo workload (bench/make_photos.py)
// libjpeg-turbo 2.1.5's decoder is 56% of decode_augment's time, and a random resized
// crop cannot skip it for the rows above the crop or the columns beside it. This one
// decodes the same coefficients (Huffman coding is lossless, so the pixels are the same
// bits) with wider tables: one 10-bit lookup yields a coefficient's run, value and
// length together where code and value fit in 10 bits (most of them at quality 90),
// where libjpeg-turbo 2.1 looks up 8 bits of code and then reads the value. The scan is
// unstuffed once, so the next 8 bytes of bits are a plain load, issued before the
// lookup of the symbol ahead of them ends.
//
// It plugs into libjpeg through the decompressor's entropy-decoder slot
// (cinfo->entropy->decode_mcu): everything else (markers, IDCT, upsampling, colour,
// crop and skip) stays libjpeg's. It takes only what it handles exactly (one baseline
// sequential Huffman scan holding every component, no restart markers, nothing decoded
// yet) and hands anything unusual to libjpeg: when the data runs into a marker or its
// end before the scan does, or holds a code no table has, it calls `fallback`, which
// must not return (jpeg_codec.cc longjmps and decodes the image again with libjpeg's own
// decoder, which then warns or errors as it always did). So corrupt data gets exactly
// libjpeg's treatment, and valid data libjpeg's bits.
#pragma once

#include <cstdint>
#include <cstdio>  // jpeglib.h needs FILE
#include <string>
#include <string_view>
#include <vector>

#include <jpeglib.h>

namespace dataecho::detail {

// Whether this build has the fast path at all. It writes one member of a struct that
// libjpeg does not export (below) and must decide exactly as libjpeg-turbo's jdhuff.c
// does, so it is built only against the libjpeg-turbo versions it was checked against:
// 2.0.0 to 3.1.x (their jpegint.h and jdhuff.c; Debian 12 has 2.1.5). CMake reads
// LIBJPEG_TURBO_VERSION_NUMBER from jconfig.h, sets DATAECHO_JPEG_FAST_HUFFMAN and says
// which it chose; any other libjpeg builds without it (JpegHuffman::install then always
// declines).
bool fast_huffman_built();

// libjpeg's entropy-decoder interface, struct jpeg_entropy_decoder in its private
// jpegint.h; jpeglib.h declares the struct without its members, and a decompressor's
// cinfo->entropy points at one. Only its first two members are declared here, the only
// ones read or written: they are the same in every version above (libjpeg-turbo 3.0
// added members after decode_mcu, so insufficient_data moved).
struct JpegEntropyDecoder {
  void (*start_pass)(j_decompress_ptr cinfo);
  boolean (*decode_mcu)(j_decompress_ptr cinfo, JBLOCKROW* mcu);
};

class JpegHuffman {
 public:
  using Fallback = void (*)(j_decompress_ptr cinfo);

  // Call after jpeg_start_decompress and before any scanline is read or skipped.
  // Returns whether this decoder took over the scan (false: libjpeg's decodes it).
  // Sets cinfo->client_data to this object, which must outlive the decompression;
  // declines where client_data already holds something else. `fallback` must not
  // return (it longjmps out of libjpeg); if it does, the process aborts.
  bool install(j_decompress_ptr cinfo, Fallback fallback);

  static constexpr int kLookahead = 10;

  struct Table {
    uint8_t bits[17] = {};  // the JHUFF_TBL this was built from (kept to reuse it)
    uint8_t values[256] = {};
    bool built = false;
    // (code length << 8) | symbol for each kLookahead-bit prefix; 0 for longer codes.
    uint16_t lookup[1 << kLookahead] = {};
    // AC tables: value << 16 | run << 8 | bits used, where a coefficient's code and
    // value bits fit in kLookahead (end of block: run 63, ZRL: run 15, value 0); 0 otherwise.
    int32_t fast_ac[1 << kLookahead] = {};
    int32_t maxcode[18] = {};    // largest code of each length, -1 if none; [17] a sentinel
    int32_t valoffset[18] = {};  // values index of a code of each length, minus the code
  };

  // The scan's entropy-coded bytes with the stuffing removed (0xFF 0x00 -> 0xFF), up to
  // the marker that ends them, then kPad zero bytes: the decoder reads 8 bytes at any
  // position it reaches without checking, and stops where it has read past the data.
  static constexpr size_t kPad = 512;
  struct Reader {
    const uint8_t* q = nullptr;  // the 8 bytes at q, big-endian, hold the next bits...
    int off = 0;                 // ...from bit `off` (<= 38 between symbols)
  };

  struct Block {
    const Table* dc = nullptr;
    const Table* ac = nullptr;
    int component = 0;  // in the scan
    bool dc_needed = false;
    bool ac_needed = false;
  };

 private:
  // libjpeg's decode_mcu: one MCU's blocks (MCU_data null: read past them).
  static boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* mcu);
  [[noreturn]] void hand_back(j_decompress_ptr cinfo) const;

  Reader reader_;
  std::vector<uint8_t> data_;             // unstuffed, plus kPad zero bytes
  size_t data_bits_ = 0;                  // bits of real data in data_
  const uint8_t* block_limit_ = nullptr;  // a block that starts past this read past the data
  const uint8_t* marker_ = nullptr;       // in the source: where the data ended
  size_t source_left_ = 0;                // source bytes from marker_ on
  long mcus_left_ = 0;                    // before the scan ends
  int last_dc_[4] = {};
  Block blocks_[10] = {};  // D_MAX_BLOCKS_IN_MCU
  int block_count_ = 0;
  Fallback fallback_ = nullptr;
  Table dc_[4], ac_[4];  // NUM_HUFF_TBLS; rebuilt only when an image's table differs
};

// Whether JpegRegionDecoder uses JpegHuffman, for the process: on unless the
// environment has DATAECHO_JPEG_HUFFMAN=libjpeg (for A/B measurements; tests call
// use_fast_huffman). DecodeOptions::fast_huffman turns it off for one pipeline.
void use_fast_huffman(bool on);

enum class FastHuffmanStatus {
  kOn,
  kOffByRequest,   // DATAECHO_JPEG_HUFFMAN=libjpeg, or use_fast_huffman(false)
  kOffBySelfTest,  // this process's libjpeg decoded the self-test's JPEGs differently
  kOffByBuild,     // built against a libjpeg it was not checked against
};
const char* fast_huffman_status_name(FastHuffmanStatus status);
// The process's status. The first call runs the self-test (thread-safe, once):
// libjpeg has no run-time version call, so before the fast path is first used a few
// small JPEGs made at start-up (every chroma layout, low and high quality, noise with
// long codes and many 0xFF bytes) are entropy-decoded both ways and their coefficients
// compared. A difference turns the fast path off for the process, said once on
// standard error.
FastHuffmanStatus fast_huffman_status();
// Runs the self-test now; true when the decoders agree. inject_mismatch changes one
// coefficient of the fast decode first, so a test sees what a mismatch does.
bool run_jpeg_huffman_self_test(bool inject_mismatch = false);
// Tests only: forgets a mismatch that run_jpeg_huffman_self_test(true) recorded.
void reset_jpeg_huffman_self_test();

// Test seam (no public API has coefficients): the quantized coefficient blocks of a
// JPEG's scan, decoded MCU by MCU through the decompressor's entropy decoder exactly as
// libjpeg's coefficient controller calls it, with JpegHuffman (`fast`) or libjpeg's
// own decoder. The first `skip_mcus` MCUs are decoded without a buffer, as
// jpeg_skip_scanlines does, and are not stored. libjpeg's warnings are counted, not
// raised. An image of more than max_pixels is refused (kError) before any allocation.
struct ScanCoefficients {
  enum class Outcome {
    kDecoded,     // every MCU decoded: `blocks` holds them
    kNotTaken,    // `fast`, but JpegHuffman left the scan to libjpeg at install
    kHandedBack,  // `fast`, and JpegHuffman handed the scan back mid-way
    kError,       // libjpeg refused the file (header, tables, or an error mid-scan)
  };
  Outcome outcome = Outcome::kError;
  std::vector<JCOEF> blocks;  // 64 coefficients per block, natural order, MCU order
  int warnings = 0;           // libjpeg warnings (strict mode makes each an error)
  std::string message;        // the error, or the first warning
};
ScanCoefficients decode_scan_coefficients(std::string_view bytes, bool fast, int scale_denom = 1,
                                          bool grey = false, long skip_mcus = 0,
                                          int64_t max_pixels = int64_t{1} << 24);
// How many times this thread's JpegRegionDecoder handed a scan to libjpeg's decoder
// (tests: the fallback ran).
long jpeg_huffman_fallbacks();
// How many scans this thread's JpegRegionDecoders gave to JpegHuffman (tests).
long jpeg_huffman_scans();

}  // namespace dataecho::detail
