// libFuzzer target: dataecho's JPEG Huffman decoder against libjpeg's on the same
// bytes, coefficient by coefficient and pixel by pixel (tests/image/jpeg_huffman_check.h
// says what is compared and what the option byte chooses). Any difference aborts.
// Seeds: fuzz/corpus/jpeg_huffman (scripts/make_jpeg_corpus.py), which the replay test
// JpegHuffmanCorpus.EveryFileAgrees also runs in every build.
#include <cstdio>
#include <cstdlib>

#include "image/jpeg_huffman_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string difference = dataecho::testing::check_jpeg_huffman(data, size);
  if (!difference.empty()) {
    std::fprintf(stderr, "jpeg_huffman_fuzz: %s\n", difference.c_str());
    std::abort();
  }
  return 0;
}
