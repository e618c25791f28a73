// jpeg_huffman_bench: entropy decoding alone, dataecho's Huffman decoder
// (src/image/jpeg_huffman.h) against libjpeg-turbo's, on the same JPEGs (Google
// Benchmark). Each iteration decodes every MCU of one image into coefficient blocks
// through the decompressor's decode_mcu, as libjpeg's coefficient controller calls it
// (blocks zeroed first); the header, jpeg_start_decompress and the decoder's set-up
// (table building, unstuffing) are outside the timed part, which is only entropy
// decoding. Time per image; bytes/s over the files' sizes. Then whole-image decodes to
// RGB: TurboJPEG's tjDecompress2 against decode_image with either Huffman decoder.
//
//   jpeg_huffman_bench [--benchmark_min_time=2] [DIR]
// DIR: a folder of .jpg files, e.g. bench/dataloader_compare.sh's photos
// (out/dataloader_data/photo_dir); without it, 64 synthetic 480x360 colour pictures
// encoded at quality 90 (4:2:0).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "dataecho/core/rng.h"
#include "dataecho/image/codec.h"
#include "image/jpeg_huffman.h"

using namespace dataecho;

namespace {

std::vector<std::string> g_files;

// A picture with smooth gradients, edges and noise: roughly a photo's entropy.
std::string synthetic_jpeg(uint64_t seed) {
  Rng rng(seed);
  const int h = 360, w = 480;
  Tensor img = Tensor::make(DType::kUInt8, {h, w, 3}, [&](std::byte* b) {
    auto* p = reinterpret_cast<uint8_t*>(b);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c) {
          const int edge = ((x / 37 + y / 29 + c) % 3) * 40;
          *p++ = static_cast<uint8_t>((x * (c + 1) / 3 + y / 2 + edge + rng.uniform(48)) & 255);
        }
  });
  return encode_jpeg(img, 90);
}

void decode_all(benchmark::State& state, bool ours) {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  detail::JpegHuffman huffman;
  alignas(64) JBLOCK blocks[D_MAX_BLOCKS_IN_MCU];
  JBLOCKROW rows[D_MAX_BLOCKS_IN_MCU];
  for (int i = 0; i < D_MAX_BLOCKS_IN_MCU; ++i) rows[i] = &blocks[i];
  size_t next = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string& f = g_files[next++ % g_files.size()];
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(f.data()), f.size());
    jpeg_read_header(&cinfo, TRUE);
    jpeg_start_decompress(&cinfo);
    if (ours && !huffman.install(&cinfo, [](j_decompress_ptr) { std::abort(); }))
      state.SkipWithError("a JPEG the decoder does not take (progressive, restart markers)");
    auto decode = reinterpret_cast<detail::JpegEntropyDecoder*>(cinfo.entropy)->decode_mcu;
    const long mcus = static_cast<long>(cinfo.MCUs_per_row) * cinfo.MCU_rows_in_scan;
    const size_t zero = sizeof(JBLOCK) * static_cast<size_t>(cinfo.blocks_in_MCU);
    state.ResumeTiming();
    for (long i = 0; i < mcus; ++i) {
      std::memset(blocks, 0, zero);
      decode(&cinfo, rows);
    }
    benchmark::DoNotOptimize(blocks);
    state.PauseTiming();
    jpeg_abort_decompress(&cinfo);
    bytes += static_cast<int64_t>(f.size());
    state.ResumeTiming();
  }
  state.SetBytesProcessed(bytes);
  jpeg_destroy_decompress(&cinfo);
}

void BM_EntropyDecode_libjpeg(benchmark::State& state) { decode_all(state, false); }
void BM_EntropyDecode_dataecho(benchmark::State& state) { decode_all(state, true); }
BENCHMARK(BM_EntropyDecode_libjpeg)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EntropyDecode_dataecho)->Unit(benchmark::kMicrosecond);

// Whole images to RGB pixels: TurboJPEG's tjDecompress2 into a reused buffer (what
// decode_image did before 3909486, 2026-12-02), and decode_image (a fresh tensor each) with
// dataecho's Huffman decoder and with libjpeg's.
void BM_DecodeImage_tjDecompress2(benchmark::State& state) {
  tjhandle h = tjInitDecompress();
  std::vector<unsigned char> out;
  size_t next = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    const std::string& f = g_files[next++ % g_files.size()];
    const auto* buf = reinterpret_cast<const unsigned char*>(f.data());
    int w = 0, hh = 0, sub = 0, cs = 0;
    tjDecompressHeader3(h, buf, f.size(), &w, &hh, &sub, &cs);
    out.resize(static_cast<size_t>(w) * hh * 3);
    if (tjDecompress2(h, buf, f.size(), out.data(), w, w * 3, hh, TJPF_RGB, 0) != 0)
      state.SkipWithError(tjGetErrorStr2(h));
    benchmark::DoNotOptimize(out.data());
    bytes += static_cast<int64_t>(f.size());
  }
  state.SetBytesProcessed(bytes);
  tjDestroy(h);
}

void decode_images(benchmark::State& state, bool ours) {
  detail::use_fast_huffman(ours);
  DecodeOptions rgb;
  rgb.channels = 3;
  size_t next = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    const std::string& f = g_files[next++ % g_files.size()];
    Tensor t = decode_image(f, rgb);
    benchmark::DoNotOptimize(t.raw_data());
    bytes += static_cast<int64_t>(f.size());
  }
  state.SetBytesProcessed(bytes);
  detail::use_fast_huffman(true);
}
void BM_DecodeImage_dataecho(benchmark::State& state) { decode_images(state, true); }
void BM_DecodeImage_dataecho_libjpeg_huffman(benchmark::State& state) {
  decode_images(state, false);
}
BENCHMARK(BM_DecodeImage_tjDecompress2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeImage_dataecho)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeImage_dataecho_libjpeg_huffman)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc > 1) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
      if (e.path().extension() == ".jpg") {
        std::ifstream in(e.path(), std::ios::binary);
        g_files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    std::printf("%zu JPEGs from %s\n", g_files.size(), argv[1]);
  }
  if (g_files.empty()) {
    for (uint64_t i = 0; i < 64; ++i) g_files.push_back(synthetic_jpeg(i));
    std::printf("64 synthetic 480x360 JPEGs, quality 90\n");
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
