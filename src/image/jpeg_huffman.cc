// The Huffman decoder of jpeg_huffman.h. ITU T.81 sections F.2.2 (decoding) and C
// (the tables) describe what it decodes.
#include "image/jpeg_huffman.h"

#include <array>
#include <cstdlib>
#include <cstring>

namespace dataecho::detail {
namespace {

// Zigzag position -> natural (row-major) position. Past 63 every entry is 63: a
// corrupt run past the block's end writes its coefficient there, as libjpeg does, and
// the fast table's end-of-block entries (run 63, value 0) write a zero there, where
// nothing has been written yet.
constexpr auto kNatural = [] {
  constexpr uint8_t zigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                                  12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                                  35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                                  58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
  std::array<uint8_t, 128> t{};
  for (int i = 0; i < 128; ++i) t[i] = i < 64 ? zigzag[i] : 63;
  return t;
}();

constexpr int kLa = JpegHuffman::kLookahead;

// The value of `s` extra bits `v` (section F.2.2.1, EXTEND).
inline int extend(int v, int s) { return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v; }

// Builds `t` from a JHUFF_TBL unless it already holds that table. False if the table
// is not a valid canonical code (libjpeg has already refused those; checked anyway).
bool build(JpegHuffman::Table& t, const JHUFF_TBL* src, bool dc) {
  if (!src) return false;
  if (t.built && std::memcmp(t.bits, src->bits, sizeof(t.bits)) == 0 &&
      std::memcmp(t.values, src->huffval, sizeof(t.values)) == 0)
    return true;
  t.built = false;
  std::memcpy(t.bits, src->bits, sizeof(t.bits));
  std::memcpy(t.values, src->huffval, sizeof(t.values));
  std::memset(t.lookup, 0, sizeof(t.lookup));
  std::memset(t.fast_ac, 0, sizeof(t.fast_ac));
  int count = 0;
  for (int len = 1; len <= 16; ++len) count += t.bits[len];
  if (count > 256) return false;
  if (dc)
    for (int i = 0; i < count; ++i)
      if (t.values[i] > 15) return false;
  int code = 0, index = 0;
  for (int len = 1; len <= 16; ++len) {
    const int n = t.bits[len];
    // As libjpeg: a length's codes must fit its bits, leaving the all-ones code unused.
    if (code + n >= (1 << len)) return false;
    t.valoffset[len] = index - code;
    t.maxcode[len] = n ? code + n - 1 : -1;
    for (int i = 0; i < n; ++i, ++code, ++index) {
      if (len <= kLa) {  // every kLookahead-bit prefix that starts with this code
        const int shift = kLa - len;
        for (int p = code << shift, e = (code + 1) << shift; p < e; ++p)
          t.lookup[p] = static_cast<uint16_t>(len << 8 | t.values[index]);
      }
    }
    code <<= 1;
  }
  t.maxcode[17] = 0x7fffffff;  // ends the search for a code longer than 16 bits
  t.valoffset[17] = 0;
  if (!dc) {
    for (int p = 0; p < (1 << kLa); ++p) {
      const int len = t.lookup[p] >> 8, sym = t.lookup[p] & 0xff;
      const int s = sym & 15;
      int run = sym >> 4;
      if (len == 0 || len + s > kLa) continue;
      // End of block: a zero 63 places on, which ends the block; ZRL: a zero 15 places
      // on. The zero goes where nothing has been written (see kNatural).
      if (s == 0 && run != 15) run = 63;
      const int v = s ? extend((p >> (kLa - len - s)) & ((1 << s) - 1), s) : 0;
      t.fast_ac[p] = static_cast<int32_t>(static_cast<uint32_t>(v) << 16) | run << 8 | (len + s);
    }
  }
  t.built = true;
  return true;
}

inline uint64_t load_be(const uint8_t* q) {
  uint64_t v;
  std::memcpy(&v, q, 8);
  return __builtin_bswap64(v);
}

// Moves the reader to the byte holding its next bit: then at least 57 bits are ready.
inline void normalize(JpegHuffman::Reader& r) {
  r.q += r.off >> 3;
  r.off &= 7;
}

// One Huffman symbol from `bits` (the next bits, at bit 63); sets `len` to its length.
// -1 for a code no table has.
inline int symbol(const JpegHuffman::Table& t, uint64_t bits, int& len) {
  const uint32_t e = t.lookup[bits >> (64 - kLa)];
  if (e) {
    len = static_cast<int>(e >> 8);
    return static_cast<int>(e & 0xff);
  }
  len = kLa + 1;
  int32_t code = static_cast<int32_t>(bits >> (64 - len));
  while (code > t.maxcode[len]) {
    ++len;
    code = static_cast<int32_t>(bits >> (64 - len));
  }
  if (len > 16) return -1;
  return t.values[(code + t.valoffset[len]) & 0xff];
}

// A symbol and its value bits (section F.2.2): the symbol, with the value in `v`.
// Starts by normalizing, so the 31 bits they take at most are there. -1 for a bad code.
inline int symbol_and_value(const JpegHuffman::Table& t, JpegHuffman::Reader& r, int& v) {
  normalize(r);
  const uint64_t bits = load_be(r.q) << r.off;
  int len = 0;
  const int sym = symbol(t, bits, len);
  if (sym < 0) return -1;
  const int s = sym & 15;
  v = s ? extend(static_cast<int>((bits << len) >> (64 - s)), s) : 0;
  r.off += len + s;
  return sym;
}

// The AC coefficients of one block (section F.2.2.2), written into `block` in natural
// order when kStore (the caller has zeroed it), else only read past. False for a bad
// code. The common case, a coefficient whose code and value fit kLookahead bits, is one
// lookup. The word of bits after it is loaded from the byte the reader is in before that
// lookup ends, so it does not wait for it: a symbol costs a lookup, a shift and an add
// in sequence (two loads in sequence made this decoder barely faster than libjpeg's).
template <bool kStore>
inline bool decode_ac(const JpegHuffman::Table& t, JpegHuffman::Reader& r, JCOEF* block) {
  const uint8_t* q = r.q;
  int off = r.off;
  uint64_t w = load_be(q);  // always the 8 bytes at q
  bool ok = true;
  for (int k = 1; k < 64;) {
    const int32_t f = t.fast_ac[(w << off) >> (64 - kLa)];
    const uint8_t* q2 = q + (off >> 3);
    const uint64_t w2 = load_be(q2);
    const int base = off & 7;
    q = q2;
    w = w2;
    if (f) {
      k += (f >> 8) & 63;
      if constexpr (kStore) block[kNatural[k]] = static_cast<JCOEF>(f >> 16);
      off = base + (f & 31);  // at most 7 + kLookahead
      ++k;
      continue;
    }
    off = base;  // 57 bits or more ahead: a code and its value take 31 at most
    const uint64_t bits = w << off;
    int len = 0;
    const int sym = symbol(t, bits, len);
    if (sym < 0) {
      ok = false;
      break;
    }
    const int run = sym >> 4, s = sym & 15;
    off += len + s;  // at most 38
    if (s) {
      k += run;
      if constexpr (kStore)
        block[kNatural[k]] =
            static_cast<JCOEF>(extend(static_cast<int>((bits << len) >> (64 - s)), s));
      ++k;
    } else {
      if (run != 15) break;  // end of block
      k += 16;
    }
  }
  r.q = q;
  r.off = off;
  return ok;
}

}  // namespace

boolean JpegHuffman::decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* mcu) {
  auto& h = *static_cast<JpegHuffman*>(cinfo->client_data);
  Reader r = h.reader_;
  bool ok = true;
  for (int i = 0; i < h.block_count_ && ok; ++i) {
    const Block& blk = h.blocks_[i];
    JCOEF* block = mcu ? *mcu[i] : nullptr;
    normalize(r);
    if (r.q > h.block_limit_) {
      ok = false;
      break;
    }
    int diff = 0;
    if (symbol_and_value(*blk.dc, r, diff) < 0) {  // the DC difference (F.2.2.1)
      ok = false;
      break;
    }
    if (blk.dc_needed) {
      // Unsigned, as libjpeg: corrupt data can push the sum past the int range.
      int& dc = h.last_dc_[blk.component];
      dc = static_cast<int>(static_cast<unsigned>(dc) + static_cast<unsigned>(diff));
      if (block) block[0] = static_cast<JCOEF>(dc);
    }
    ok = blk.ac_needed && block ? decode_ac<true>(*blk.ac, r, block)
                                : decode_ac<false>(*blk.ac, r, nullptr);
  }
  // Bits past the data's end were decoded (zeros, where libjpeg warns), or a bad code.
  const size_t pos = static_cast<size_t>(r.q - h.data_.data()) * 8 + static_cast<size_t>(r.off);
  if (!ok || pos > h.data_bits_) h.hand_back(cinfo);
  h.reader_ = r;
  if (--h.mcus_left_ == 0) {  // the scan is done: libjpeg reads on from its marker
    cinfo->src->next_input_byte = h.marker_;
    cinfo->src->bytes_in_buffer = h.source_left_;
  }
  return TRUE;
}

bool fast_huffman_built() {
#if defined(DATAECHO_JPEG_FAST_HUFFMAN) && DATAECHO_JPEG_FAST_HUFFMAN
  return true;
#else
  return false;
#endif
}

void JpegHuffman::hand_back(j_decompress_ptr cinfo) const {
  fallback_(cinfo);
  std::abort();  // a fallback that returns would leave libjpeg mid-MCU
}

namespace {

// Copies the entropy-coded bytes at [p, end) into `out` without their stuffing, up to
// the marker that ends them, as libjpeg's decoder reads them: 0xFF 0x00 is a data byte
// 0xFF; 0xFF then anything but 0x00 or 0xFF is a marker. Returns where that marker's
// first 0xFF is, or null where this decoder must leave the scan to libjpeg:
// - No marker ends the data (a truncated file): libjpeg's decoder reads ahead of the
//   bits it needs, and whether it reaches the end of the file (a warning, so an error
//   in strict mode) depends on how far; only libjpeg can say.
// - Fill bytes before a 0x00 (0xFF 0xFF... 0x00), which the standard does not allow.
//   libjpeg's slow path reads them as one data byte 0xFF, as this decoder would, but
//   its fast path (taken while 512 bytes per block or more are left) reads them as a
//   marker, decodes the MCU on zeros, then decodes it again with the slow path
//   without clearing it, so that coefficients the second decode does not write keep
//   the first one's values (libjpeg-turbo 2.0 to 3.1; tests/image/data/
//   jpeg_regressions/jpeg_huffman_mismatch_1.jpg). Only libjpeg reproduces that.
const uint8_t* unstuff(const uint8_t* p, const uint8_t* end, std::vector<uint8_t>& out) {
  out.clear();
  for (;;) {
    const auto* ff =
        static_cast<const uint8_t*>(std::memchr(p, 0xFF, static_cast<size_t>(end - p)));
    if (!ff) return nullptr;
    out.insert(out.end(), p, ff);
    const uint8_t* q = ff + 1;
    while (q < end && *q == 0xFF) ++q;
    if (q == end) return nullptr;
    if (*q != 0) return ff;
    if (q != ff + 1) return nullptr;
    out.push_back(0xFF);
    p = q + 1;
  }
}

}  // namespace

bool JpegHuffman::install(j_decompress_ptr cinfo, Fallback fallback) {
  if (!fast_huffman_built() || !fallback || (cinfo->client_data && cinfo->client_data != this))
    return false;
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->restart_interval != 0 ||
      cinfo->comps_in_scan != cinfo->num_components || cinfo->comps_in_scan > 4 || cinfo->Ss != 0 ||
      cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 || cinfo->Al != 0 || cinfo->input_iMCU_row != 0 ||
      cinfo->unread_marker != 0 || cinfo->blocks_in_MCU > 10 || cinfo->blocks_in_MCU < 1 ||
      !cinfo->entropy || !cinfo->src)
    return false;
  for (int ci = 0; ci < cinfo->comps_in_scan; ++ci) {
    const jpeg_component_info* c = cinfo->cur_comp_info[ci];
    if (!c || c->dc_tbl_no < 0 || c->dc_tbl_no >= NUM_HUFF_TBLS || c->ac_tbl_no < 0 ||
        c->ac_tbl_no >= NUM_HUFF_TBLS ||
        !build(dc_[c->dc_tbl_no], cinfo->dc_huff_tbl_ptrs[c->dc_tbl_no], true) ||
        !build(ac_[c->ac_tbl_no], cinfo->ac_huff_tbl_ptrs[c->ac_tbl_no], false))
      return false;
  }
  block_count_ = cinfo->blocks_in_MCU;
  for (int i = 0; i < block_count_; ++i) {
    const int ci = cinfo->MCU_membership[i];
    if (ci < 0 || ci >= cinfo->comps_in_scan) return false;
    const jpeg_component_info* c = cinfo->cur_comp_info[ci];
    Block& blk = blocks_[i];
    blk.dc = &dc_[c->dc_tbl_no];
    blk.ac = &ac_[c->ac_tbl_no];
    blk.component = ci;
    // As libjpeg: no coefficients for a component the output does not use, and only
    // the DC one for a 1/8-scale decode.
    blk.dc_needed = c->component_needed;
    blk.ac_needed = c->component_needed && c->DCT_scaled_size > 1;
  }
  for (int& dc : last_dc_) dc = 0;
  const uint8_t* src = cinfo->src->next_input_byte;
  const uint8_t* src_end = src + cinfo->src->bytes_in_buffer;
  marker_ = unstuff(src, src_end, data_);
  if (!marker_) return false;
  source_left_ = static_cast<size_t>(src_end - marker_);
  data_bits_ = data_.size() * 8;
  data_.resize(data_.size() + kPad, 0);
  // A block reads at most 64 codes and values of 31 bits past where it starts (under
  // kPad bytes), so a block that starts inside the data plus a few bytes stays inside
  // the buffer.
  block_limit_ = data_.data() + data_bits_ / 8 + 8;
  reader_ = Reader{data_.data(), 0};
  mcus_left_ = static_cast<long>(cinfo->MCUs_per_row) * static_cast<long>(cinfo->MCU_rows_in_scan);
  fallback_ = fallback;
  cinfo->client_data = this;
  reinterpret_cast<JpegEntropyDecoder*>(cinfo->entropy)->decode_mcu = decode_mcu;
  return true;
}

}  // namespace dataecho::detail
