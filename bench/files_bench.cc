// The `files` source: listing an ImageFolder tree of 200,000 empty files (1,000 class
// folders of 200), with the listing's bytes per file, and reading 4,000 small files
// (16 KiB) with 1 and more reads in flight, from the page cache and evicted from it. The trees are
// made once per run under $TMPDIR (or /tmp) and removed at the end.
//
//   build/bin/files_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "dataecho/formats/files.h"
#include "dataecho/spec/pipeline_def.h"

namespace {

namespace fs = std::filesystem;

// A tree of `classes` x `per_class` files of `bytes` each, made once per process.
const std::string& tree(int classes, int per_class, size_t bytes) {
  static std::map<std::string, std::string> made;
  const std::string key =
      std::to_string(classes) + "x" + std::to_string(per_class) + "x" + std::to_string(bytes);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  const char* tmp = std::getenv("TMPDIR");
  std::string root = std::string(tmp ? tmp : "/tmp") + "/dataecho_files_bench_" +
                     std::to_string(::getpid()) + "_" + key;
  std::string data(bytes, 'x');
  for (int c = 0; c < classes; ++c) {
    char cls[32];
    std::snprintf(cls, sizeof cls, "/n%08d", c);
    fs::create_directories(root + cls);
    for (int i = 0; i < per_class; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "%s/n%08d_%06d.JPEG", cls, c, i);
      int fd = ::open((root + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
        std::abort();
      ::close(fd);
    }
  }
  std::atexit([] {
    for (const auto& [k, r] : made) fs::remove_all(r);
  });
  return made[key] = root;
}

void BM_ListImageFolder(benchmark::State& state) {
  dataecho::FilesOptions o;
  o.root = tree(1000, 200, 0);
  size_t files = 0, bytes = 0;
  for (auto _ : state) {
    auto l = dataecho::FileListing::make(o);
    files = l->size();
    bytes = l->memory_bytes();
  }
  state.counters["files"] = static_cast<double>(files);
  state.counters["bytes_per_file"] = static_cast<double>(bytes) / static_cast<double>(files);
  state.counters["files_per_s"] =
      benchmark::Counter(static_cast<double>(files), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ListImageFolder)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadSmallFiles(benchmark::State& state) {
  const std::string& root = tree(20, 200, 16 << 10);
  auto def = dataecho::files({{"root", root}, {"reads_in_flight", state.range(0)}});
  int64_t n = 0;
  for (auto _ : state) {
    auto p = def.build();
    while (auto e = p->next()) ++n;
  }
  state.counters["files_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadSmallFiles)->Arg(1)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same files evicted from the page cache before each pass (posix_fadvise DONTNEED):
// every read waits for the disk, as a first epoch or a network file system does.
void BM_ReadSmallFilesCold(benchmark::State& state) {
  const std::string& root = tree(20, 200, 16 << 10);
  auto def = dataecho::files({{"root", root}, {"reads_in_flight", state.range(0)}});
  int64_t n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (!e.is_regular_file()) continue;
      int fd = ::open(e.path().c_str(), O_RDONLY);
      ::fdatasync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    state.ResumeTiming();
    auto p = def.build();
    while (auto e = p->next()) ++n;
  }
  state.counters["files_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadSmallFilesCold)
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
