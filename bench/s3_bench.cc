// dataecho's side of bench/s3_compare.sh, through the public API:
//
//   s3_bench list PATTERN [--max-keys N] [--list-parallelism P]
//       expand_uris(PATTERN) with the "s3" options; prints {"keys", "requests",
//       "seconds"}: the URIs listed, the ListObjectsV2 pages asked for
//       (s3_list_requests) and the wall seconds of the listing.
//   s3_bench read SPEC.json
//       builds the spec's pipeline (which lists its s3:// patterns) and reads every
//       element; prints {"elements", "bytes", "seconds"}: the seconds from before the
//       build to the last element, the bytes of the elements' tensors.
//
// The endpoint and credentials come from the environment (AWS_ENDPOINT_URL_S3,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), as for any s3:// read. Errors go to stderr
// with exit status 1.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "dataecho/core/error.h"
#include "dataecho/core/pipeline.h"
#include "dataecho/core/stats.h"
#include "dataecho/io/byte_stream.h"
#include "dataecho/spec/build.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int list(int argc, char** argv) {
  dataecho::StreamOptions o;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--max-keys") {
      o.s3.max_keys = std::atoi(argv[i + 1]);
    } else if (flag == "--list-parallelism") {
      o.s3.list_parallelism = std::atoi(argv[i + 1]);
    } else {
      std::cerr << "s3_bench: unknown option " << flag << "\n";
      return 2;
    }
  }
  o.stats = std::make_shared<dataecho::NodeStats>("0:list");
  const auto start = std::chrono::steady_clock::now();
  const size_t keys = dataecho::expand_uris({argv[2]}, "", o).size();
  const double s = seconds_since(start);
  std::cout << nlohmann::json{{"keys", keys},
                              {"requests", o.stats->counters()["s3_list_requests"]},
                              {"seconds", s}}
                   .dump()
            << "\n";
  return 0;
}

int read(const std::string& spec_path) {
  const auto start = std::chrono::steady_clock::now();
  auto pipeline = dataecho::build_pipeline_from_file(spec_path);
  int64_t elements = 0, bytes = 0;
  while (auto e = pipeline->next()) {
    ++elements;
    bytes += static_cast<int64_t>(e->nbytes());
  }
  const double s = seconds_since(start);
  std::cout << nlohmann::json{{"elements", elements}, {"bytes", bytes}, {"seconds", s}}.dump()
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 2 ? argv[1] : "";
  try {
    if (command == "list") return list(argc, argv);
    if (command == "read" && argc == 3) return read(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "s3_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: s3_bench list PATTERN [--max-keys N] [--list-parallelism P] | "
               "s3_bench read SPEC.json\n";
  return 2;
}
