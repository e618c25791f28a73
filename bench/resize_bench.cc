// resize_bench: the resampler's output kinds side by side (Google Benchmark), on a
// 500x375 RGB picture (the photo workload's size) already in memory:
//   Resize224/*      resize to 224x224 (an exact resize, aspect not kept);
//   CropFlip224/*    random resized crop 224 + flip (the data-service worker's
//                    augmentation), over a fixed cycle of 64 draws;
// each with
//   u8               uint8 HWC output, the vector vertical kernels (AVX-512 or AVX2);
//   u8_plain         uint8 HWC output, the plain vertical pass (the filter into a float
//                    row, then rounding per value through a strided store): what the
//                    uint8 output cost before those kernels;
//   float            float32 CHW output with the ImageNet normalization.
// Time per iteration is time per image. On a loaded machine compare medians of
// repetitions run interleaved:
//   build/bin/resize_bench --benchmark_repetitions=9
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>

#include "dataecho/core/allocator.h"
#include "dataecho/core/rng.h"
#include "dataecho/image/transforms.h"
#include "image/resample.h"  // detail::force_vfilter_kernel

using namespace dataecho;

namespace {

enum class Out { kU8, kU8Plain, kFloat };

// A smooth picture with some noise, 375 rows of 500 RGB pixels.
const Tensor& picture() {
  static const Tensor img = Tensor::make(DType::kUInt8, {375, 500, 3}, [](std::byte* b) {
    Rng rng(3);
    auto* p = reinterpret_cast<uint8_t*>(b);
    for (int y = 0; y < 375; ++y)
      for (int x = 0; x < 500; ++x)
        for (int c = 0; c < 3; ++c) {
          const double v = 128 + 80 * std::sin(x * 0.031 + c) * std::cos(y * 0.023 - c) +
                           20 * (rng.uniform01() - 0.5);
          *p++ = static_cast<uint8_t>(std::fmin(std::fmax(v, 0.0), 255.0));
        }
  });
  return img;
}

AugmentOptions options(Out out, bool crop) {
  AugmentOptions o;
  if (crop) {
    o.random_resized_crop = RandomResizedCropOptions{};  // 224, scale 0.08..1, ratio 3/4..4/3
    o.flip_probability = 0.5;
  } else {
    o.resize_height = o.resize_width = 224;
  }
  if (out == Out::kFloat)
    o.normalize = NormalizeOptions{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  return o;
}

void run(benchmark::State& state, Out out, bool crop) {
  detail::force_vfilter_kernel(out == Out::kU8Plain ? detail::VFilterKernel::kScalar
                                                    : detail::VFilterKernel::kBest);
  const Tensor& img = picture();
  const AugmentOptions o = options(out, crop);
  uint64_t i = 0;
  for (auto _ : state) {
    Rng rng(i++ % 64);
    benchmark::DoNotOptimize(augment(img, o, rng));
  }
  state.SetItemsProcessed(state.iterations());
  detail::force_vfilter_kernel(detail::VFilterKernel::kBest);
}

void Resize224(benchmark::State& state, Out out) { run(state, out, false); }
void CropFlip224(benchmark::State& state, Out out) { run(state, out, true); }

BENCHMARK_CAPTURE(Resize224, u8, Out::kU8)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Resize224, u8_plain, Out::kU8Plain)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Resize224, float, Out::kFloat)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(CropFlip224, u8, Out::kU8)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(CropFlip224, u8_plain, Out::kU8Plain)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(CropFlip224, float, Out::kFloat)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_pipelines();  // as the dataecho tool does: outputs reuse memory
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
