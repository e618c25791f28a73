// The cache stage's second pass against what it replaces, in the same run:
//   BM_LocalShards     a pass over local TFRecord shards, raw records as tensors;
//   BM_DiskCache       the same records from a disk cache filled beforehand (untimed):
//                      tfrecord -> cache(path), the source not read;
//   BM_InMemorySource  a later pass of memory source -> repeat over the same records;
//   BM_MemoryCache     a later pass of tfrecord -> cache -> repeat, from the memory cache.
// Arg: record bytes, 784 (a Fashion-MNIST image's pixels; 60,000 of them) or 102,400 (a
// photo-sized record, like encoded ImageNet JPEGs; 1,280 of them). Records and files are
// written to $TMPDIR and read from the page cache. Rates are bytes of tensors per second;
// the ratios are cache over source.
//   build/bin/cache_bench --benchmark_min_time=3
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <vector>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"

namespace {

using namespace dataecho;
namespace fs = std::filesystem;

struct Data {
  std::string dir, shards, cache_dir;
  int64_t records = 0;
};

// 4 shards of `bytes`-byte records (about 47 MiB or 128 MiB in all), once per size.
const Data& data(int64_t bytes) {
  static std::map<int64_t, Data> made;
  auto it = made.find(bytes);
  if (it != made.end()) return it->second;
  Data d;
  d.dir = (fs::temp_directory_path() / ("dataecho-cache-bench-" + std::to_string(bytes))).string();
  fs::remove_all(d.dir);
  fs::create_directories(d.dir);
  d.records = bytes < 4096 ? 60'000 : 1'280;
  std::string rec(static_cast<size_t>(bytes), '\0');
  for (int s = 0; s < 4; ++s) {
    TfRecordWriter w(d.dir + "/train-" + std::to_string(s) + ".tfrecord");
    for (int64_t i = s; i < d.records; i += 4) {
      for (size_t k = 0; k < rec.size(); ++k)
        rec[k] = static_cast<char>((k + i) * 2654435761u >> 24);
      w.write(rec);
    }
    w.close();
  }
  d.shards = d.dir + "/train-{0..3}.tfrecord";
  d.cache_dir = d.dir + "/cache";
  return made.emplace(bytes, d).first->second;
}

PipelineDef shards(const Data& d) {
  return PipelineDef("tfrecord", {{"uri", d.shards}, {"raw", true}});
}

int64_t drain_pass(Pipeline& p, int64_t limit = -1) {
  int64_t bytes = 0;
  for (int64_t n = 0; limit < 0 || n < limit; ++n) {
    auto e = p.next();
    if (!e) break;
    bytes += static_cast<int64_t>(e->nbytes());
  }
  return bytes;
}

void BM_LocalShards(benchmark::State& state) {
  const Data& d = data(state.range(0));
  int64_t total = 0;
  for (auto _ : state) total += drain_pass(*shards(d).build());
  state.SetBytesProcessed(total);
}

void BM_DiskCache(benchmark::State& state) {
  const Data& d = data(state.range(0));
  PipelineDef def = shards(d).cache({.path = d.cache_dir});
  drain_pass(*def.build());  // fills the file
  int64_t total = 0;
  for (auto _ : state) total += drain_pass(*def.build());
  state.SetBytesProcessed(total);
}

void BM_InMemorySource(benchmark::State& state) {
  const Data& d = data(state.range(0));
  std::vector<Example> all;
  {
    auto p = shards(d).build();
    while (auto e = p->next()) all.push_back(std::move(*e));
  }
  // The same shape as BM_MemoryCache: one pipeline, a repeat, a pass per iteration.
  PipelineDef def = PipelineDef::from_dataset(make_memory_source(std::move(all), true), "bench");
  def.repeat(-1);
  auto p = def.build();
  drain_pass(*p, d.records);
  int64_t total = 0;
  for (auto _ : state) total += drain_pass(*p, d.records);
  state.SetBytesProcessed(total);
}

void BM_MemoryCache(benchmark::State& state) {
  const Data& d = data(state.range(0));
  PipelineDef def = shards(d).cache({.path = "", .max_bytes = int64_t{1} << 32});
  def.repeat(-1);
  auto p = def.build();
  drain_pass(*p, d.records);  // the first pass fills it
  int64_t total = 0;
  for (auto _ : state) total += drain_pass(*p, d.records);
  state.SetBytesProcessed(total);
}

BENCHMARK(BM_LocalShards)->Arg(784)->Arg(102400)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DiskCache)->Arg(784)->Arg(102400)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_InMemorySource)->Arg(784)->Arg(102400)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MemoryCache)->Arg(784)->Arg(102400)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
