// dataloader_bench: the dataecho side of bench/dataloader_compare.sh.
//
//   dataloader_bench pipeline --spec FILE [--epochs E] [--window-seconds S] [--json FILE]
//                             [--fusion on|off]
//       Measures E windows. A window builds the pipeline from FILE and pulls it to the
//       end, again and again (one pass = one epoch of the data), until at least S seconds
//       (default 5) have passed since its first batch (with `--fusion off`, without the
//       map-and-batch fusion rewrite: bench/fusion_compare.sh). The elements must be
//       batches (field `image`, rows = shape[0]). A window's rate is the images after its
//       first batch over the time from that batch to its last, the rule the DataLoader
//       side (dataloader_compare.py) uses, so that neither side is charged for starting
//       up once, and both pay every later epoch's start. A window of a few epochs of
//       8 batches (63 ms each) measured the scheduler more than the pipeline. Prints and
//       writes the median window (images_per_s), the best and worst, and every window,
//       with each window's passes and the last pass's tuner report (tuning_last_pass:
//       what "auto" settings chose, and whether its tuner resumed from an earlier pass's).
//
//   dataloader_bench reference --dir DIR [--work decode|augment] [--threads T] [--epochs E]
//                              [--window-seconds S] [--json FILE]
//       The references, on every .jpg under DIR, read into memory once; T threads each
//       take their share (image i goes to thread i mod T), pass after pass until a window
//       of S seconds (default 5) is full; E windows.
//       --work decode (default), "decode only": TurboJPEG's tjDecompress2 into a reused
//         RGB buffer, nothing else: no crop, flip, normalize, batch or copy. The loop is
//         the one of bench/image_bench.cc (kReference).
//       --work augment, "the same work by hand": the full decode, then random resized
//         crop 224, antialiased bilinear resize, flip and ImageNet normalization into a
//         float32 CHW batch of 128 per thread, in plain loops (bench/hand_augment.h):
//         the output dataecho's decode_augment gives, without its crop-region decode.
//
// A plain main() printing one JSON object per run: the shell script compares the runs.
#include <turbojpeg.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/allocator.h"
#include "dataecho/core/clock.h"
#include "dataecho/core/error.h"
#include "dataecho/core/process_memory.h"
#include "dataecho/spec/build.h"
#include "hand_augment.h"

using namespace dataecho;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode, spec, dir, json, work = "decode";
  bool fusion = true;
  int epochs = 3;
  double window_seconds = 5;
  int threads = 1;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: dataloader_bench pipeline --spec FILE [--epochs E] [--json FILE] "
               "[--fusion on|off]\n"
               "       dataloader_bench reference --dir DIR [--work decode|augment] [--threads T] "
               "[--epochs E] [--json FILE]\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage();
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--spec")
      a.spec = v;
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--json")
      a.json = v;
    else if (k == "--epochs")
      a.epochs = std::stoi(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--window-seconds")
      a.window_seconds = std::stod(v);
    else if (k == "--work" && (v == "decode" || v == "augment"))
      a.work = v;
    else if (k == "--fusion" && (v == "on" || v == "off"))
      a.fusion = v == "on";
    else
      usage();
  }
  if (a.epochs < 1 || a.threads < 1) usage();
  return a;
}

// The peak over time of this process's PSS (its share of shared pages), sampled every
// 0.2 s from /proc/self/smaps_rollup on a thread of its own: the figure that sums
// correctly over a DataLoader's processes, measured the same way here.
class PssSampler {
 public:
  PssSampler() : thread_([this] { run(); }) {}
  ~PssSampler() { stop(); }
  int64_t stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    return peak_kib_;
  }

 private:
  void run() {
    while (!stop_) {
      peak_kib_ = std::max(peak_kib_, process_pss_kib());
      for (int i = 0; i < 20 && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::atomic<bool> stop_{false};
  int64_t peak_kib_ = 0;
  std::thread thread_;
};

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// CPU seconds of every thread of this process, user + system.
double process_cpu_seconds() { return static_cast<double>(process_cpu_ns()) * 1e-9; }

// CPU seconds every core of the machine has spent busy since boot (/proc/stat's "cpu"
// line: user, nice, system, irq, softirq, steal): over a window, that less this
// process's own CPU time is the load of everything else (`other_cores`).
double machine_busy_seconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return static_cast<double>(user + nice + system + irq + softirq + steal) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The measured windows of a run: each one's images per second, images per CPU-second
// (all threads; on a machine shared with other work the figure the load disturbs least)
// and the machine's other load (the cores everything but this process kept busy).
struct Windows {
  std::vector<double> rates, cpu_rates, others;

  // A window of `images` over `dt` seconds that began at (busy0, cpu0), printed.
  void add(int window, int64_t passes, double images, double dt, double busy0, double cpu0) {
    const double cpu = process_cpu_seconds() - cpu0;
    others.push_back(std::max(0.0, (machine_busy_seconds() - busy0 - cpu) / dt));
    rates.push_back(images / dt);
    cpu_rates.push_back(images / cpu);
    std::fprintf(stderr,
                 "  window %d: %lld passes, %.1f s, %.0f images/s, %.0f images/cpu-s, other "
                 "load %.2f cores\n",
                 window, static_cast<long long>(passes), dt, rates.back(), cpu_rates.back(),
                 others.back());
  }

  nlohmann::json summary() const {
    nlohmann::json j;
    j["windows_other_cores"] = others;
    j["max_other_cores"] = *std::max_element(others.begin(), others.end());
    std::vector<double> cpu_sorted = cpu_rates;
    std::sort(cpu_sorted.begin(), cpu_sorted.end());
    j["images_per_cpu_s"] = cpu_sorted[cpu_sorted.size() / 2];
    j["epochs_images_per_cpu_s"] = cpu_rates;
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    j["images_per_s"] = sorted[sorted.size() / 2];  // the median window, with its spread:
    j["median_images_per_s"] = sorted[sorted.size() / 2];
    j["min_images_per_s"] = sorted.front();
    j["max_images_per_s"] = sorted.back();
    j["epochs_images_per_s"] = rates;  // every window ("epochs": the older name)
    return j;
  }
};

nlohmann::json run_pipeline(const Args& a) {
  if (a.spec.empty()) usage();
  Windows windows;
  int64_t images = 0, batches = 0;
  nlohmann::json shape, tuning, passes_per_window = nlohmann::json::array();
  for (int window = 0; window < a.epochs; ++window) {
    SteadyClock::time_point first{};
    double first_cpu = 0, first_busy = 0;
    int64_t after_first = 0, nb_window = 0, passes = 0;
    do {
      BuildOptions options;
      options.map_and_batch_fusion = a.fusion;
      auto pipeline = build_pipeline_from_file(a.spec, options);
      int64_t n = 0, nb = 0;
      while (auto e = pipeline->next()) {
        const Tensor& img = e->get("image");
        const int64_t rows = img.shape().empty() ? 1 : img.shape()[0];
        if (nb_window == 0) {
          first = SteadyClock::now();
          first_cpu = process_cpu_seconds();
          first_busy = machine_busy_seconds();
          shape = img.shape();
        } else {
          after_first += rows;
        }
        n += rows;
        ++nb;
        ++nb_window;
      }
      images = n;
      batches = nb;
      ++passes;
      tuning = pipeline->tuning();  // the last pass's: what an "auto" setting chose
      if (nb == 0) throw Error(ErrorCode::kInvalidArgument, "dataloader_bench", "no batches");
    } while (nb_window < 2 || seconds_since(first) < a.window_seconds);
    const double dt = seconds_since(first);
    passes_per_window.push_back(passes);
    windows.add(window, passes, static_cast<double>(after_first), dt, first_busy, first_cpu);
  }
  nlohmann::json j = windows.summary();
  j["images_per_epoch"] = images;
  j["batches_per_epoch"] = batches;
  j["window_seconds"] = a.window_seconds;
  j["batch_shape"] = shape;
  j["spec"] = a.spec;
  j["fusion"] = a.fusion;
  j["passes_per_window"] = passes_per_window;
  j["tuning_last_pass"] = tuning;
  return j;
}

nlohmann::json run_reference(const Args& a) {
  if (a.dir.empty()) usage();
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(a.dir)) {
    const auto ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw Error(ErrorCode::kNotFound, "dataloader_bench", "no .jpg files", a.dir);
  std::vector<std::string> jpegs;
  size_t bytes = 0;
  for (const auto& p : paths) {
    std::ifstream f(p, std::ios::binary);
    jpegs.emplace_back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    bytes += jpegs.back().size();
  }
  std::atomic<int64_t> sink{0};
  std::atomic<int> failures{0};
  const bool augment = a.work == "augment";
  constexpr int kSize = 224, kBatch = 128;
  const size_t image_floats = 3u * kSize * kSize;
  if (augment) {
    // Self-check: a grey image of value v comes out as (v/255 - mean) / std everywhere.
    std::vector<uint8_t> grey(300u * 200u * 3u, 128);
    std::vector<float> out(image_floats);
    std::mt19937_64 rng(1);
    bench::HandScratch scratch;
    bench::augment_by_hand(grey.data(), 300, 200, kSize, rng, scratch, out.data());
    const float want = (128 / 255.0f - 0.485f) / 0.229f;
    if (std::abs(out[12345] - want) > 1e-4f)
      throw Error(ErrorCode::kInternal, "dataloader_bench", "hand augmentation self-check failed");
  }
  auto worker = [&](int t) {
    tjhandle h = tjInitDecompress();
    std::vector<uint8_t> buf;
    std::vector<float> batch(augment ? image_floats * kBatch : 0);
    std::mt19937_64 rng(1000 + static_cast<uint64_t>(t));
    bench::HandScratch scratch;
    int slot = 0;
    int64_t acc = 0;
    for (size_t i = static_cast<size_t>(t); i < jpegs.size(); i += static_cast<size_t>(a.threads)) {
      const auto* b = reinterpret_cast<const unsigned char*>(jpegs[i].data());
      int w = 0, ht = 0, ss = 0, cs = 0;
      tjDecompressHeader3(h, b, jpegs[i].size(), &w, &ht, &ss, &cs);
      if (buf.size() < static_cast<size_t>(w) * ht * 3) buf.resize(static_cast<size_t>(w) * ht * 3);
      if (tjDecompress2(h, b, jpegs[i].size(), buf.data(), w, 0, ht, TJPF_RGB, 0) != 0) ++failures;
      acc += buf[i % buf.size()];
      if (augment) {
        float* out = &batch[static_cast<size_t>(slot) * image_floats];
        bench::augment_by_hand(buf.data(), w, ht, kSize, rng, scratch, out);
        acc += static_cast<int64_t>(out[i % image_floats] * 16);
        slot = (slot + 1) % kBatch;
      }
    }
    tjDestroy(h);
    sink += acc;
  };
  Windows windows;
  for (int window = 0; window < a.epochs; ++window) {  // passes over the images, >= S s
    auto t0 = SteadyClock::now();
    const double cpu0 = process_cpu_seconds();
    const double busy0 = machine_busy_seconds();
    int64_t passes = 0;
    do {
      std::vector<std::thread> pool;
      for (int t = 0; t < a.threads; ++t) pool.emplace_back(worker, t);
      for (auto& th : pool) th.join();
      ++passes;
    } while (seconds_since(t0) < a.window_seconds);
    const double images = static_cast<double>(passes) * static_cast<double>(jpegs.size());
    const double dt = seconds_since(t0);
    windows.add(window, passes, images, dt, busy0, cpu0);
  }
  if (failures.load() > 0)
    throw Error(ErrorCode::kDataLoss, "dataloader_bench", "tjDecompress2 failed", a.dir);
  nlohmann::json j = windows.summary();
  j["images_per_epoch"] = jpegs.size();
  j["window_seconds"] = a.window_seconds;
  j["threads"] = a.threads;
  j["work"] = augment ? "the same work by hand: full TurboJPEG decode, random resized crop 224, "
                        "antialiased bilinear resize, flip, normalize to float32 CHW batches of 128"
                      : "decode only: TurboJPEG tjDecompress2 to RGB";
  j["mean_jpeg_bytes"] = static_cast<double>(bytes) / static_cast<double>(jpegs.size());
  j["checksum"] = sink.load();
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  dataecho::tune_allocator_for_pipelines();  // as the dataecho tool does
  Args a = parse(argc, argv);
  try {
    PssSampler pss;
    nlohmann::json j;
    if (a.mode == "pipeline")
      j = run_pipeline(a);
    else if (a.mode == "reference")
      j = run_reference(a);
    else
      usage();
    j["mode"] = a.mode;
    j["peak_pss_kib"] = pss.stop();
    std::cout << j.dump() << std::endl;
    if (!a.json.empty()) std::ofstream(a.json) << j.dump(2) << '\n';
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dataloader_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
