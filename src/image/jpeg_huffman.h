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
#include <vector>

#include <jpeglib.h>

namespace dataecho::detail {

// libjpeg's entropy-decoder interface, struct jpeg_entropy_decoder in its private
// jpegint.h (unchanged since IJG 6b, and part of the libjpeg.so.62 ABI that every
// libjpeg-turbo keeps); jpeglib.h declares the struct without its members. A
// decompressor's cinfo->entropy points at one.
struct JpegEntropyDecoder {
  void (*start_pass)(j_decompress_ptr cinfo);
  boolean (*decode_mcu)(j_decompress_ptr cinfo, JBLOCKROW* mcu);
  boolean insufficient_data;
};

class JpegHuffman {
 public:
  using Fallback = void (*)(j_decompress_ptr cinfo);

  // Call after jpeg_start_decompress and before any scanline is read or skipped.
  // Returns whether this decoder took over the scan (false: libjpeg's decodes it).
  // Sets cinfo->client_data to this object, which must outlive the decompression.
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

// Whether JpegRegionDecoder uses JpegHuffman (on unless the environment has
// DATAECHO_JPEG_HUFFMAN=libjpeg). For tests and A/B measurements; not thread-safe.
void use_fast_huffman(bool on);
// How many times this thread's JpegRegionDecoder handed a scan to libjpeg's decoder
// (tests: the fallback ran).
long jpeg_huffman_fallbacks();

}  // namespace dataecho::detail
