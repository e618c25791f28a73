// Sharding "static" as separate processes over gRPC on 127.0.0.1 (the fixture of
// processes_fixture.h): two `dataecho pipe` consumers of a static job over an IDX source,
// each consumer's ids compared line by line with the order docs/service.md defines (its
// lanes' pieces round robin, each piece in the upstream's order), with one worker
// process, three, and three of which one is SIGKILLed mid-epoch. Every lane is read at
// once, so a consumer that returned elements in the order its streams deliver them would
// interleave its lanes' pieces, and differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/service/service.h"
#include "dataecho/spec/service.h"
#include "service/dispatcher_state.h"
#include "service/processes_fixture.h"
#include "test_util.h"

namespace dataecho::service {
namespace {

using process_test::Child;
using process_test::each_id_once;
using process_test::kDataecho;
using process_test::read_text;
using process_test::ServiceProcesses;
using process_test::write_file;
using process_test::write_images;

// 3,000 images: 6 lanes of 4 pieces of 125 (the plan's least pieces a lane), 2 consumers
// of 3 lanes each. The upstream sleeps 1 ms an element, so that a piece takes about
// 0.125 s and a lane about 0.5 s.
constexpr uint32_t kStaticImages = 3000;
constexpr int kLanes = 6;
constexpr int kConsumers = 2;

using Sequences = std::vector<std::vector<int64_t>>;  // each consumer's ids, in its order

// The job's upstream over dir/images.idx, with a seed of its own so that the expected
// order can be made here from the spec (without one, it is seeded from the job's name);
// `slow`: with the sleep.
nlohmann::json upstream(const std::string& dir, bool slow) {
  nlohmann::json u = {{"seed", 7}, {"source", {{"kind", "idx"}, {"images", dir + "/images.idx"}}}};
  if (slow) u["stages"] = {{{"op", "map"}, {"fn", "sleep"}, {"args", {{"ms", 1}}}}};
  return u;
}

// Consumer r's spec of the static job "static" at `address`; its path.
std::string consumer_spec(const std::string& dir, const std::string& address, int r) {
  const nlohmann::json source = {{"kind", "service"},       {"dispatcher", address},
                                 {"job", "static"},         {"sharding", "static"},
                                 {"lanes", kLanes},         {"consumers", kConsumers},
                                 {"consumer", r},           {"buffer_mb", 1},
                                 {"connect_timeout_s", 20}, {"pipeline", upstream(dir, true)}};
  const std::string path = dir + "/consumer" + std::to_string(r) + ".json";
  write_file(path, nlohmann::json{{"source", source}}.dump());
  return path;
}

// Consumer r's ids as static sharding orders them: its pieces of epoch 0 in static_order,
// each piece's in the upstream's order (without the sleep, which keeps the ids).
std::vector<int64_t> expected_ids(const std::string& dir, int r) {
  const std::string up = upstream(dir, false).dump();
  const auto plan = service_plan_builder()(up, kLanes);
  std::vector<int64_t> ids;
  for (int64_t p : static_order(plan->lanes_of(0), kConsumers, r)) {
    auto pipeline = service_piece_builder()(up, 0, 0, [&](std::shared_ptr<const Dataset> s) {
      return make_piece_source(std::move(s), plan->pieces[static_cast<size_t>(p)], 0, nullptr);
    });
    for (const Example& e : dataecho::testing::drain(*pipeline)) ids.push_back(e.id());
  }
  return ids;
}

// The epoch of job "static" at `address`, both consumers (a `dataecho pipe` each, logs
// dir/TAG-pipeR.log) reading at once: each one's ids in the order of its lines.
// `at_line(n)` runs once consumer 0 has printed n lines. Consumer 1's lines are read
// after consumer 0's: meanwhile its output waits in the pipe (a slow trainer), and its
// streams run on into its buffer.
Sequences read_epoch(const std::string& dir, const std::string& address, const std::string& tag,
                     const std::function<void(size_t)>& at_line = nullptr) {
  const auto log = [&](int r) { return dir + "/" + tag + "-pipe" + std::to_string(r) + ".log"; };
  std::vector<std::unique_ptr<Child>> pipes;
  for (int r = 0; r < kConsumers; ++r)
    pipes.push_back(std::make_unique<Child>(
        std::vector<std::string>{kDataecho, "pipe", consumer_spec(dir, address, r)}, log(r)));
  Sequences got(kConsumers);
  for (int r = 0; r < kConsumers; ++r) {
    while (auto l = pipes[r]->line(60)) {
      got[r].push_back(nlohmann::json::parse(*l)["ids"][0]);
      if (r == 0 && at_line) at_line(got[r].size());
    }
    EXPECT_EQ(pipes[r]->terminate(), 0) << read_text(log(r));
  }
  return got;
}

// Whether `got` is `want`; else where it first differs.
::testing::AssertionResult same_sequence(const std::vector<int64_t>& got,
                                         const std::vector<int64_t>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure()
             << "at " << i << ": id " << got[i] << ", not " << want[i];
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " ids, not " << want.size();
  return ::testing::AssertionSuccess();
}

// Sharding "static" read with one worker process, then, on a fresh dispatcher (the same
// spec: a trainer's next run), with three: each consumer's sequence of ids is the same
// both times, and the one docs/service.md's order gives; the two consumers' ids are the
// source's once each.
TEST_F(ServiceProcesses, StaticSameOrderWhateverTheWorkers) {
  write_images(dir + "/images.idx", kStaticImages);
  auto [one, workers] = with_one_worker_then(3, [&] { return read_epoch(dir, address, "one"); });
  if (HasFailure()) return;
  const Sequences three = read_epoch(dir, address, "three");
  std::vector<int64_t> all;
  for (int r = 0; r < kConsumers; ++r) {
    EXPECT_TRUE(same_sequence(one[r], expected_ids(dir, r)))
        << "consumer " << r << ", one worker; " << read_text(dir + "/one-pipe0.log");
    EXPECT_TRUE(same_sequence(three[r], one[r]))
        << "consumer " << r << ", three workers; " << read_text(dir + "/three-pipe0.log");
    all.insert(all.end(), three[r].begin(), three[r].end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_TRUE(each_id_once(all, kStaticImages));
}

// Sharding "static" over three worker processes, w2 SIGKILLed mid-epoch (once consumer
// 0 has printed 400 lines: every lane is in its second piece): each consumer cuts its
// streams of w2 and reads their lanes on from the records kept on another worker, and
// its sequence of ids is the one-worker reading's.
TEST_F(ServiceProcesses, StaticWorkerSigkilled) {
  write_images(dir + "/images.idx", kStaticImages);
  auto [one, workers] = with_one_worker_then(3, [&] { return read_epoch(dir, address, "one"); });
  if (HasFailure()) return;
  const Sequences killed = read_epoch(dir, address, "killed", [&](size_t n) {
    if (n == 400) workers[1]->kill_now();
  });
  const std::string log = read_text(dir + "/killed-pipe0.log");
  EXPECT_NE(log.find("service: worker w2 ("), std::string::npos) << log;
  for (int r = 0; r < kConsumers; ++r)
    EXPECT_TRUE(same_sequence(killed[r], one[r]))
        << "consumer " << r << "; " << read_text(dir + "/killed-pipe" + std::to_string(r) + ".log");
}

}  // namespace
}  // namespace dataecho::service
