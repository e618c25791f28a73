// TFRecord reading throughput next to plain read() of the same file, in the same run.
// The file (128 MiB of 100 KiB records, like encoded ImageNet JPEGs) is written to
// $TMPDIR and read from the page cache in two states, where both measure CPU cost, and
// from the disk (see Where below).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/spec/build.h"

namespace {

using namespace dataecho;

constexpr size_t kRecordBytes = 100 << 10;
constexpr size_t kRecords = 1280;

void write_file(const std::string& path) {
  std::string rec(kRecordBytes, '\0');
  for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<char>(i * 2654435761u >> 24);
  TfRecordWriter w(path);
  for (size_t i = 0; i < kRecords; ++i) {
    rec[0] = static_cast<char>(i);
    w.write(rec);
  }
  w.close();
}

// The benchmark's file in $TMPDIR, removed at exit (by the static's destructor: an
// atexit handler registered while the static was being made would run after it died).
struct TempFile {
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / name).string()) {
    write_file(path);
  }
  TempFile(TempFile&& other) noexcept : path(std::move(other.path)) { other.path.clear(); }
  ~TempFile() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove(path, ignored);
  }
  std::string path;
};

// Drops a file's pages from the page cache (clean pages; no root needed).
void evict(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

int64_t plain_read_pass(const std::string& path) {
  static std::vector<char> buf(1 << 20);
  int64_t total = 0;
  int fd = ::open(path.c_str(), O_RDONLY);
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) > 0) {
    benchmark::DoNotOptimize(buf.data());
    total += n;
  }
  ::close(fd);
  return total;
}

// Where a pass finds the file. Each is a case users meet, and plain read() runs at very
// different speeds in them (on this VM 7-16 GB/s as written, 16-26 as read back; likely
// the page cache's folio sizes, which readahead makes large):
//  kWritten:  in the page cache as the writer left it: a dataset just converted.
//  kReadBack: in the page cache as a read from disk left it: the second epoch over a
//             dataset that fits in memory.
//  kCold:     evicted before each pass (untimed), so read from the disk (here the host's
//             cache behind the virtual disk): a first epoch, or data larger than memory.
enum Where : int64_t { kWritten = 0, kReadBack = 1, kCold = 2 };

const std::string& bench_file(int64_t where) {
  static const TempFile written("dataecho-formats-bench.tfrecord");
  static const TempFile read_back = [] {
    TempFile f("dataecho-formats-bench-readback.tfrecord");
    ::sync();
    evict(f.path);
    plain_read_pass(f.path);
    return f;
  }();
  return where == kWritten ? written.path : read_back.path;
}

const std::string& pass_file(benchmark::State& state, int64_t where) {
  const std::string& path = bench_file(where);
  if (where == kCold) {
    state.PauseTiming();
    evict(path);
    state.ResumeTiming();
  }
  return path;
}

int64_t reader_pass(const std::string& path, bool verify_crc) {
  TfRecordReader::Options options;
  options.verify_crc = verify_crc;
  TfRecordReader r(open_stream(path), options);
  std::shared_ptr<Buffer> rec;
  int64_t total = 0;
  while (r.next(&rec) == TfRecordReader::Status::kOk) {
    benchmark::DoNotOptimize(rec->data());
    total += static_cast<int64_t>(rec->size()) + 16;
  }
  return total;
}

// Arg: Where.
void BM_PlainRead(benchmark::State& state) {
  int64_t total = 0;
  for (auto _ : state) total += plain_read_pass(pass_file(state, state.range(0)));
  state.SetBytesProcessed(total);
}
BENCHMARK(BM_PlainRead)
    ->ArgName("where")
    ->DenseRange(kWritten, kCold)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: verify the CRCs (1, the default; 0: what the CRC costs), and Where.
void BM_TfRecordReader(benchmark::State& state) {
  int64_t total = 0;
  for (auto _ : state) total += reader_pass(pass_file(state, state.range(1)), state.range(0) != 0);
  state.SetBytesProcessed(total);
}
BENCHMARK(BM_TfRecordReader)
    ->ArgNames({"crc", "where"})
    ->ArgsProduct({{1, 0}, {kWritten, kReadBack, kCold}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The whole source: raw records as tensors through a pipeline.
void BM_TfRecordSourceRaw(benchmark::State& state) {
  std::string spec =
      R"({"source": {"kind": "tfrecord", "uri": ")" + bench_file(kWritten) + R"(", "raw": true}})";
  int64_t total = 0;
  for (auto _ : state) {
    auto p = build_pipeline(parse_spec_text(spec, "bench"));
    while (auto e = p->next()) total += static_cast<int64_t>(e->nbytes()) + 16;
  }
  state.SetBytesProcessed(total);
}
BENCHMARK(BM_TfRecordSourceRaw)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
