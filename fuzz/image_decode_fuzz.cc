// libFuzzer target: the image decoders and the fused decode + augmentation on arbitrary
// bytes; tests/image/image_decode_check.h says what is checked and what the first two
// bytes choose. Any difference aborts. Seeds: run with DATAECHO_FUZZ_WRITE_SEEDS=DIR,
// the binary writes small JPEGs and PNGs made with dataecho's own encoders into DIR and
// exits (scripts/fuzz.sh does).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "image/image_decode_check.h"  // tests/
#include "image/image_test_util.h"     // tests/: the tests' synthetic images

namespace {

using namespace dataecho;

void write_seeds(const std::string& dir) {
  struct Shape3 {
    int h, w, c;
  };
  const Shape3 shapes[] = {{8, 8, 1}, {16, 12, 3}, {17, 33, 3}, {40, 40, 1}, {64, 48, 3}};
  int n = 0;
  for (const Shape3& s : shapes) {
    Tensor img = testing::synthetic_image(s.h, s.w, s.c, static_cast<uint64_t>(n));
    const std::string images[] = {encode_jpeg(img, 90), encode_jpeg(img, 40), encode_png(img)};
    for (const std::string& bytes : images) {
      std::ofstream f(dir + "/seed" + std::to_string(n), std::ios::binary);
      const char prefix[2] = {static_cast<char>(n % 3 == 2 ? 2 : 0), static_cast<char>(n % 5)};
      f.write(prefix, 2);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      ++n;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("DATAECHO_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string difference = testing::check_image_decode(data, size);
  if (!difference.empty()) {
    std::fprintf(stderr, "image_decode_fuzz: %s\n", difference.c_str());
    std::abort();
  }
  return 0;
}
