// TFRecord reading throughput next to plain read() of the same file, in the same run.
// The file (128 MiB of 100 KiB records, like encoded ImageNet JPEGs) is written once
// to $TMPDIR and read from the page cache, so both measure CPU cost, not the disk.
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

const std::string& bench_file() {
  static const std::string path = [] {
    std::string p =
        (std::filesystem::temp_directory_path() / "dataecho-formats-bench.tfrecord").string();
    std::string rec(kRecordBytes, '\0');
    for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<char>(i * 2654435761u >> 24);
    TfRecordWriter w(p);
    for (size_t i = 0; i < kRecords; ++i) {
      rec[0] = static_cast<char>(i);
      w.write(rec);
    }
    w.close();
    std::atexit([] { std::filesystem::remove(bench_file()); });
    return p;
  }();
  return path;
}

void BM_PlainRead(benchmark::State& state) {
  const std::string& path = bench_file();
  std::vector<char> buf(1 << 20);
  int64_t total = 0;
  for (auto _ : state) {
    int fd = ::open(path.c_str(), O_RDONLY);
    ssize_t n;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) {
      benchmark::DoNotOptimize(buf.data());
      total += n;
    }
    ::close(fd);
  }
  state.SetBytesProcessed(total);
}
BENCHMARK(BM_PlainRead)->Unit(benchmark::kMillisecond)->UseRealTime();

// state.range(0): verify the CRCs (1, the default) or not (0: what the CRC costs).
void BM_TfRecordReader(benchmark::State& state) {
  const std::string& path = bench_file();
  TfRecordReader::Options options;
  options.verify_crc = state.range(0) != 0;
  int64_t total = 0;
  for (auto _ : state) {
    TfRecordReader r(open_stream(path), options);
    std::shared_ptr<Buffer> rec;
    while (r.next(&rec) == TfRecordReader::Status::kOk) {
      benchmark::DoNotOptimize(rec->data());
      total += static_cast<int64_t>(rec->size()) + 16;
    }
  }
  state.SetBytesProcessed(total);
}
BENCHMARK(BM_TfRecordReader)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole source: raw records as tensors through a pipeline.
void BM_TfRecordSourceRaw(benchmark::State& state) {
  std::string spec =
      R"({"source": {"kind": "tfrecord", "uri": ")" + bench_file() + R"(", "raw": true}})";
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
