// `dataecho bench read URI...`: how fast the io layer reads shards, over k parallel
// connections (one stream per connection at a time, shards handed out in order).
#include <atomic>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho::cli {
namespace {

struct Totals {
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> records{0};
};

// Reads one stream to its end; with `records`, walks the TFRecord framing
// (u64 length, u32 length CRC, data, u32 data CRC) and counts records. CRCs are not
// checked here: this measures the transport.
void read_one(const std::string& uri, const StreamOptions& options, bool records, Totals& totals) {
  std::unique_ptr<ByteStream> s = open_stream(uri, options);  // http(s) -> open_http_stream
  std::vector<char> buf(1 << 20);
  if (!records) {
    // Bounded by the stream's length: every read returns > 0 bytes until the end.
    while (size_t n = s->read(buf.data(), buf.size())) totals.bytes += static_cast<int64_t>(n);
    return;
  }
  while (true) {
    char header[12];
    size_t n = s->read_fully(header, sizeof(header));
    if (n == 0) break;
    if (n < sizeof(header)) {
      throw Error(ErrorCode::kDataLoss, "bench read", "truncated TFRecord header", uri);
    }
    uint64_t length;
    std::memcpy(&length, header, sizeof(length));
    uint64_t want = length + 4;
    if (want > buf.size()) buf.resize(want);
    if (s->read_fully(buf.data(), want) != want) {
      throw Error(ErrorCode::kDataLoss, "bench read",
                  "truncated TFRecord record at byte " + std::to_string(s->position()), uri);
    }
    totals.bytes += static_cast<int64_t>(12 + want);
    ++totals.records;
  }
}

// Reads `uris` over k threads, each taking the next shard; the first error stops the
// others' next shards and is thrown here.
void read_all(const std::vector<std::string>& uris, const StreamOptions& options, bool records,
              int k, Totals& totals) {
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;
  std::vector<std::thread> workers;
  for (int w = 0; w < k; ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < uris.size(); i = next++) {
        try {
          read_one(uris[i], options, records, totals);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
          next = uris.size();
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

void add_bench_read_command(CLI::App& bench) {
  struct Args {
    std::vector<std::string> uris;
    int connections = 4;
    bool records = false;
    bool json = false;
    size_t buffer_bytes = 1 << 20;
    int repeat = 1;
    std::string cache_dir;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = bench.add_subcommand(
      "read", "read shards (local or http(s)) over k parallel connections; report MB/s");
  cmd->add_option("uri", args->uris, "shards: paths, globs, {a..b} ranges, http(s) URLs")
      ->required();
  cmd->add_option("--connections,-k", args->connections, "parallel streams (default 4)");
  cmd->add_flag("--records", args->records, "walk TFRecord framing and report records/s");
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("--buffer", args->buffer_bytes, "read-ahead bytes per stream (default 1 MiB)");
  cmd->add_option("--repeat", args->repeat, "read the list this many times (default 1)");
  cmd->add_option("--cache-dir", args->cache_dir,
                  "keep http(s) shards in this folder, fetched once (the sources' cache_dir)");
  cmd->callback([args] {
    std::vector<std::string> uris;
    for (const auto& u : expand_uris(args->uris)) {
      for (int r = 0; r < std::max(1, args->repeat); ++r) uris.push_back(u);
    }
    auto stats = std::make_shared<NodeStats>("bench read");
    StreamOptions options;
    options.buffer_bytes = args->buffer_bytes;
    options.cache_dir = args->cache_dir;
    options.stats = stats;
    Totals totals;
    int k = std::max(1, args->connections);
    auto start = std::chrono::steady_clock::now();
    read_all(uris, options, args->records, k, totals);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double bytes = static_cast<double>(totals.bytes.load());
    nlohmann::json out = {
        {"files", uris.size()},
        {"connections", k},
        {"bytes", totals.bytes.load()},
        {"seconds", seconds},
        {"mb_per_s", bytes / 1e6 / seconds},
        {"mib_per_s", bytes / (1 << 20) / seconds},
    };
    if (args->records) {
      out["records"] = totals.records.load();
      out["records_per_s"] = static_cast<double>(totals.records.load()) / seconds;
    }
    for (const auto& [key, value] : stats->counters()) out[key] = value;
    if (args->json) {
      std::cout << out.dump() << std::endl;
      return;
    }
    std::cout << std::fixed << std::setprecision(1) << uris.size() << " files, " << bytes / 1e6
              << " MB in " << std::setprecision(3) << seconds << " s over " << k
              << " connections: " << std::setprecision(1) << bytes / 1e6 / seconds << " MB/s ("
              << bytes / (1 << 20) / seconds << " MiB/s)";
    if (args->records) {
      std::cout << ", " << totals.records.load() << " records, "
                << static_cast<double>(totals.records.load()) / seconds << " records/s";
    }
    std::cout << "\n";
    for (const auto& [key, value] : stats->counters())
      std::cout << "  " << key << " " << value << "\n";
  });
}

}  // namespace dataecho::cli
