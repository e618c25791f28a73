// autotune_bench: one pipeline pulled for a fixed time, for bench/autotune_compare.sh
// (autotuning against the best hand-tuned setting).
//
//   autotune_bench --spec FILE --seconds S [--json FILE]
//
// Builds the pipeline once (the spec should repeat its data, so that it never ends) and
// pulls it for S seconds, with nothing else in the consumer's thread. Reports rows/s
// over the whole S seconds (start-up and the tuner's warm-up included: what a user
// gets), rows/s over the second half (the settled rate), the process's CPU cores, and
// the tuner's report (what it chose and when). One JSON object on stdout (and in FILE).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "dataecho/core/clock.h"
#include "dataecho/spec/build.h"

int main(int argc, char** argv) {
  std::string spec, json_out;
  double seconds = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--spec")
      spec = v;
    else if (k == "--seconds")
      seconds = std::stod(v);
    else if (k == "--json")
      json_out = v;
  }
  if (spec.empty() || seconds <= 0) {
    std::fprintf(stderr, "usage: autotune_bench --spec FILE --seconds S [--json FILE]\n");
    return 2;
  }
  try {
    const int64_t t0 = dataecho::now_ns(), c0 = dataecho::process_cpu_ns();
    auto p = dataecho::build_pipeline_from_file(spec);
    const int64_t end = t0 + static_cast<int64_t>(seconds * 1e9);
    const int64_t half = t0 + static_cast<int64_t>(seconds * 0.5e9);
    int64_t rows = 0, rows_at_half = -1, t_half = 0;
    while (true) {
      const int64_t now = dataecho::now_ns();
      if (now >= end) break;
      if (rows_at_half < 0 && now >= half) rows_at_half = rows, t_half = now;
      auto e = p->next();
      if (!e) break;
      rows += static_cast<int64_t>(e->num_rows());
    }
    const int64_t t1 = dataecho::now_ns(), c1 = dataecho::process_cpu_ns();
    const double wall = static_cast<double>(t1 - t0) / 1e9;
    nlohmann::json j;
    j["spec"] = spec;
    j["seconds"] = wall;
    j["rows"] = rows;
    j["rows_per_s"] = static_cast<double>(rows) / wall;
    if (rows_at_half >= 0)
      j["rows_per_s_second_half"] =
          static_cast<double>(rows - rows_at_half) / (static_cast<double>(t1 - t_half) / 1e9);
    j["cores"] = static_cast<double>(c1 - c0) / 1e9 / wall;
    j["tuning"] = p->tuning();
    j["stats"] = p->stats().to_json();
    std::cout << j.dump() << "\n";
    if (!json_out.empty()) std::ofstream(json_out) << j.dump(1) << "\n";
    std::fprintf(stderr, "  %.0f rows/s (%.0f in the second half), %.2f cores\n",
                 j["rows_per_s"].get<double>(), j.value("rows_per_s_second_half", 0.0),
                 j["cores"].get<double>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "autotune_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
