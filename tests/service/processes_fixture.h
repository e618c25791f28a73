// What the tests of the data service as separate processes share (processes_test.cc,
// processes_static_test.cc): `dataecho dispatcher`, `dataecho worker` and `dataecho pipe`
// started as a person starts them over gRPC on 127.0.0.1, the ports read from the lines
// they print; the fixture `ServiceProcesses` (a dispatcher process), skipped where the
// build has no gRPC plugin or no `dataecho` command. One fixture class for both files: a
// test suite's tests must share it.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process_util.h"
#include "test_util.h"

namespace dataecho::service::process_test {

using dataecho::testing::temp_dir;
using dataecho::testing::write_file;
using process_testing::Child;
using process_testing::read_text;
using process_testing::service_processes_missing;

inline const std::string kDataecho = std::string(DATAECHO_BINARY_DIR) + "/bin/dataecho";

// Runs a command to its end; its standard output.
inline std::string run_output(const std::vector<std::string>& argv, const std::string& log,
                              int* status) {
  Child child(argv, log);
  std::string out;
  while (auto l = child.line(120)) out += *l + "\n";
  *status = child.terminate();
  return out;
}

// An idx file of `n` images of side x side bytes, image i's bytes all i % 251.
inline void write_images(const std::string& path, uint32_t n, uint32_t side = 2) {
  std::string b = {0, 0, 8, 3};
  for (uint32_t v : {n, side, side})
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>((v >> s) & 0xff));
  for (uint32_t i = 0; i < n; ++i) b.append(side * side, static_cast<char>(i % 251));
  write_file(path, b);
}

// The sorted first ids of `dataecho pipe`'s lines.
inline std::vector<int64_t> ids_of_lines(const std::string& out) {
  std::vector<int64_t> ids;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) ids.push_back(nlohmann::json::parse(l)["ids"][0]);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Whether `ids` (sorted) are 0 to n - 1, each once.
inline ::testing::AssertionResult each_id_once(const std::vector<int64_t>& ids, int64_t n) {
  if (ids.size() != static_cast<size_t>(n))
    return ::testing::AssertionFailure() << ids.size() << " ids, not " << n;
  for (int64_t i = 0; i < n; ++i)
    if (ids[static_cast<size_t>(i)] != i)
      return ::testing::AssertionFailure()
             << "the id at " << i << " is " << ids[static_cast<size_t>(i)];
  return ::testing::AssertionSuccess();
}

// A dispatcher's address, from the line it prints.
inline std::string dispatcher_address(Child& dispatcher, const std::string& log) {
  const auto listening = dispatcher.line();
  if (!listening || listening->rfind("listening on 127.0.0.1:", 0) != 0)
    throw std::runtime_error(listening.value_or("(nothing)") + "; " + read_text(log));
  return listening->substr(std::string("listening on ").size());
}

// A dispatcher process on 127.0.0.1 (address: its HOST:PORT), the logs in `dir`.
class ServiceProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = service_processes_missing(); !why.empty()) GTEST_SKIP() << why;
    start_dispatcher({"--port", "0"});
  }
  // (Re)starts the dispatcher process with these arguments (--port among them).
  void start_dispatcher(const std::vector<std::string>& args) {
    dispatcher_.reset();
    std::vector<std::string> argv = {kDataecho, "dispatcher", "--bind", "127.0.0.1"};
    argv.insert(argv.end(), args.begin(), args.end());
    dispatcher_ = std::make_unique<Child>(argv, dir + "/dispatcher.log");
    address = dispatcher_address(*dispatcher_, dir + "/dispatcher.log");
  }
  Child& dispatcher() { return *dispatcher_; }
  // `read()` with one worker process, then a fresh dispatcher (as for a trainer's next
  // run) and `n` workers started: what read() gave, and those workers.
  template <class Read>
  auto with_one_worker_then(int n, Read read) {
    decltype(read()) first{};
    {
      auto one = start_workers(1);
      if (!HasFailure()) first = read();
    }
    start_dispatcher({"--port", "0"});
    return std::make_pair(std::move(first), start_workers(n));
  }

  // `n` worker processes, each serving.
  std::vector<std::unique_ptr<Child>> start_workers(int n,
                                                    const std::vector<std::string>& args = {}) {
    std::vector<std::unique_ptr<Child>> workers;
    for (int w = 1; w <= n; ++w) {
      const std::string log = dir + "/worker" + std::to_string(w) + ".log";
      std::vector<std::string> argv = {kDataecho, "worker", "--dispatcher",
                                       address,   "--bind", "127.0.0.1"};
      argv.insert(argv.end(), args.begin(), args.end());
      workers.push_back(std::make_unique<Child>(argv, log));
      const auto serving = workers.back()->line();
      if (!serving || serving->find(" serving on 127.0.0.1:") == std::string::npos)
        ADD_FAILURE() << serving.value_or("(nothing)") << "; " << read_text(log);
    }
    return workers;
  }
  // The dynamic spec of the fault tests: 6,000 images, 24 pieces of 250 (four frames),
  // the upstream sleeping 0.2 ms an element.
  static constexpr uint32_t kImages = 6000;
  void write_dynamic_spec() {
    write_images(dir + "/images.idx", kImages);
    write_spec({{"sharding", "dynamic"},
                {"lanes", 6},
                {"buffer_mb", 1},
                {"stages", {{{"op", "map"}, {"fn", "sleep"}, {"args", {{"ms", 0.2}}}}}}});
  }
  // dir/spec.json: a service source of job "ids" over dir/images.idx, with the source's
  // `options` ("stages": the upstream's stages).
  void write_spec(nlohmann::json options = nlohmann::json::object()) {
    nlohmann::json upstream = {{"source", {{"kind", "idx"}, {"images", dir + "/images.idx"}}}};
    if (options.contains("stages")) {
      upstream["stages"] = options["stages"];
      options.erase("stages");
    }
    nlohmann::json source = {{"kind", "service"},
                             {"dispatcher", address},
                             {"job", "ids"},
                             {"connect_timeout_s", 20},
                             {"pipeline", upstream}};
    source.update(options);
    write_file(dir + "/spec.json", nlohmann::json{{"source", source}}.dump());
  }

  const std::string dir = temp_dir();
  std::string address;

 private:
  std::unique_ptr<Child> dispatcher_;
};

}  // namespace dataecho::service::process_test
