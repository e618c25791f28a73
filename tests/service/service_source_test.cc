// The `service` source with a real dispatcher and real workers over the in-process
// transport (the same servers and calls as over gRPC, without sockets): sharding "off"
// (each worker streams its own passes of the whole upstream), the fingerprint, the token
// and protocol checks, and the errors a person reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "dataecho/service/service.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/service.h"
#include "service/calls.h"
#include "service/loopback_worker.h"
#include "service/transport.h"
#include "test_util.h"

namespace dataecho::service {
namespace {

using dataecho::testing::build;
using dataecho::testing::drain;
using dataecho::testing::error_of;
using dataecho::testing::temp_dir;
using dataecho::testing::values;
using dataecho::testing::write_file;

const std::string kUpstream =
    R"({"seed": 7, "source": {"kind": "range", "count": 300},
        "stages": [{"op": "shuffle", "buffer": 300}]})";

// Whether `c` is an interleaving of `a` and `b` (each in its own order).
bool interleaves(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                 const std::vector<int64_t>& c) {
  if (a.size() + b.size() != c.size()) return false;
  std::vector<std::vector<char>> ok(a.size() + 1, std::vector<char>(b.size() + 1, 0));
  ok[0][0] = 1;
  for (size_t i = 0; i <= a.size(); ++i)
    for (size_t j = 0; j <= b.size(); ++j) {
      if (i > 0 && ok[i - 1][j] && a[i - 1] == c[i + j - 1]) ok[i][j] = 1;
      if (j > 0 && ok[i][j - 1] && b[j - 1] == c[i + j - 1]) ok[i][j] = 1;
    }
  return ok[a.size()][b.size()];
}

class ServiceSource : public ::testing::Test {
 protected:
  void SetUp() override { set_default_transport(in_process_transport()); }
  void TearDown() override { set_default_transport(nullptr); }

  std::unique_ptr<Dispatcher> start_dispatcher_with(const std::string& token = "") {
    DispatcherOptions o;
    o.bind = "127.0.0.1";
    o.token = token;
    return start_dispatcher(o);
  }
  std::unique_ptr<Worker> start_worker_at(int dispatcher_port, const std::string& token = "") {
    WorkerOptions o = loopback_worker(dispatcher_port);
    o.token = token;
    return start_service_worker(o);
  }
  // A pipeline spec of a service source; `more` adds fields to the source object.
  static std::string spec(int port, const std::string& upstream, const std::string& more = "",
                          const std::string& stages = "") {
    return R"({"source": {"kind": "service", "dispatcher": "127.0.0.1:)" + std::to_string(port) +
           R"(", "job": "train", "pipeline": )" + upstream + more + "}" +
           (stages.empty() ? "" : ", \"stages\": " + stages) + "}";
  }
  // Worker w's pass `epoch` of kUpstream, as its builder makes it.
  static std::vector<int64_t> pass_of(int64_t worker, int64_t epoch) {
    auto p = service_upstream_builder()(kUpstream, worker, epoch, 0);
    return values(drain(*p));
  }
};

TEST_F(ServiceSource, AnOffModeEpochOverTwoWorkersGivesEachWorkersPass) {
  auto d = start_dispatcher_with();
  auto w1 = start_worker_at(d->port());
  auto w2 = start_worker_at(d->port());
  ASSERT_EQ(w1->number(), 1);
  ASSERT_EQ(w2->number(), 2);
  // Two epochs: a trainer-side repeat opens the second, which the workers make anew.
  auto p = build(spec(d->port(), kUpstream, "", R"([{"op": "repeat", "count": 2}])"));
  const std::vector<int64_t> got = values(drain(*p));
  ASSERT_EQ(got.size(), 4u * 300u);
  const std::vector<int64_t> first(got.begin(), got.begin() + 600),
      second(got.begin() + 600, got.end());
  EXPECT_NE(pass_of(1, 0), pass_of(2, 0));  // the seed is salted by the worker's number
  EXPECT_NE(pass_of(1, 0), pass_of(1, 1));  // and by the epoch
  EXPECT_TRUE(interleaves(pass_of(1, 0), pass_of(2, 0), first));
  EXPECT_TRUE(interleaves(pass_of(1, 1), pass_of(2, 1), second));
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], static_cast<int64_t>(i / 2));
}

TEST_F(ServiceSource, FingerprintIgnoresAddressAndCredentials) {
  const std::string dir = temp_dir();
  write_file(dir + "/a.token", "first\n");
  write_file(dir + "/b.token", "second\n");
  auto def = [&](int port, const std::string& more, const std::string& upstream = kUpstream) {
    return PipelineDef::from_json(nlohmann::json::parse(spec(port, upstream, more)));
  };
  const std::string base = def(5000, "").fingerprint();
  EXPECT_EQ(def(6001, R"(, "token_file": ")" + dir + R"(/a.token", "buffer_mb": 8)").fingerprint(),
            base);
  EXPECT_EQ(def(7002, R"(, "token_file": ")" + dir + R"(/b.token", "connect_timeout_s": 2)")
                .fingerprint(),
            base);
  // Nor do TLS's roots and name.
  EXPECT_EQ(def(7003, R"(, "ca_file": "ca.pem", "ca_path": "certs", "tls_server_name": "h")")
                .fingerprint(),
            base);
  // A consumer (rank) of a dynamic job fingerprints as the others.
  const std::string ranged = R"({"source": {"kind": "range", "count": 12}})";
  EXPECT_EQ(
      def(5000, R"(, "sharding": "dynamic", "lanes": 6, "consumers": 2, "consumer": 1)", ranged)
          .fingerprint(),
      def(5000, R"(, "sharding": "dynamic", "lanes": 6)", ranged).fingerprint());
  EXPECT_NE(def(5000, R"(, "sharding": "dynamic", "lanes": 3)", ranged).fingerprint(),
            def(5000, R"(, "sharding": "dynamic", "lanes": 6)", ranged).fingerprint());
  // What the workers produce is in it: the upstream and the job.
  EXPECT_NE(def(5000, "", R"({"source": {"kind": "range", "count": 301}})").fingerprint(), base);
  const PipelineDef other_job =
      service_source(PipelineDef::from_json(nlohmann::json::parse(kUpstream)),
                     {.dispatcher = "127.0.0.1:5000", .job = "eval"});
  EXPECT_NE(other_job.fingerprint(), base);
  // The C++ form writes the same spec.
  const PipelineDef same = service_source(PipelineDef::from_json(nlohmann::json::parse(kUpstream)),
                                          {.dispatcher = "10.0.0.1:9", .job = "train"});
  EXPECT_EQ(same.fingerprint(), base);
  EXPECT_EQ(PipelineDef::from_json(same.to_json()), same);
}

TEST_F(ServiceSource, ATokenInTheSpecIsRefused) {
  const std::string e =
      error_of([&] { build(spec(5000, kUpstream, R"(, "token": "s3cr3t-value")")); });
  EXPECT_CONTAINS(e, "$.source.token");
  EXPECT_CONTAINS(e,
                  "a token in a spec is logged and checkpointed: give token_file or "
                  "DATAECHO_SERVICE_TOKEN");
  EXPECT_EQ(e.find("s3cr3t-value"), std::string::npos) << e;
}

TEST_F(ServiceSource, AnUpstreamErrorNamesItsPath) {
  EXPECT_CONTAINS(error_of([&] {
                    build(spec(5000, R"({"source": {"kind": "range"}, "stages": [{"size": 2}]})"));
                  }),
                  "$.source.pipeline.stages[0]");
  EXPECT_CONTAINS(error_of([&] { build(spec(5000, "[1]")); }),
                  "$.source.pipeline: expected a pipeline");
}

// Sharding "dynamic" and "static" read pieces from their middle: only element-wise stages
// run on the workers, and the refusal names the sharding and the stage and says where it
// goes; the consumers must divide the lanes.
TEST_F(ServiceSource, PieceShardingRefusesStagesThatAreNotElementWise) {
  for (const std::string sharding : {"dynamic", "static"}) {
    SCOPED_TRACE(sharding);
    const std::string option = R"(, "sharding": ")" + sharding + "\"";
    for (const std::string stage :
         {R"({"op": "shuffle", "buffer": 10})", R"({"op": "echo", "factor": 2})",
          R"({"op": "batch", "size": 4})", R"({"op": "repeat", "count": 2})"}) {
      const std::string upstream = R"({"source": {"kind": "range", "count": 10}, "stages": [)"
                                   R"({"op": "filter", "fn": "even"}, )" +
                                   stage + "]}";
      const std::string op = nlohmann::json::parse(stage).at("op");
      const std::string e = error_of([&] { build(spec(5000, upstream, option)); });
      EXPECT_CONTAINS(e, "$.source.pipeline.stages[1]");
      EXPECT_CONTAINS(e, "sharding \"" + sharding + "\" runs only element-wise stages");
      EXPECT_CONTAINS(e, "move `" + op + "` after the service source, on the trainer's side");
    }
    const std::string e = error_of([&] {
      build(spec(5000, R"({"kind": "range", "count": 10})",
                 option + R"(, "lanes": 12, "consumers": 5)"));
    });
    EXPECT_CONTAINS(
        e, "$.source.consumers: 12 lanes do not split over 5 consumers: use 1, 2, 3, 4, 6 or 12");
  }
}

TEST_F(ServiceSource, WrongTokenIsRefusedOnBothSidesNamingWhereToLook) {
  auto d = start_dispatcher_with("right-token");
  // A worker.
  std::string e = error_of([&] { start_worker_at(d->port(), "wrong-token"); });
  EXPECT_CONTAINS(e, "the dispatcher at 127.0.0.1:" + std::to_string(d->port()) +
                         " refused this worker's token (check --token-file or "
                         "DATAECHO_SERVICE_TOKEN)");
  e = error_of([&] { start_worker_at(d->port()); });
  EXPECT_CONTAINS(e, "needs a token and this worker has none");
  // A consumer.
  auto w = start_worker_at(d->port(), "right-token");
  const std::string dir = temp_dir();
  write_file(dir + "/wrong.token", "wrong-token\n");
  auto p = build(spec(d->port(), kUpstream, R"(, "token_file": ")" + dir + "/wrong.token\""));
  e = error_of([&] { p->next(); });
  EXPECT_CONTAINS(e,
                  "refused this consumer's token (check the spec's token_file or "
                  "DATAECHO_SERVICE_TOKEN)");
  EXPECT_EQ(e.find("wrong-token"), std::string::npos) << e;
  // The right token reads.
  write_file(dir + "/right.token", "right-token\n");
  auto ok = build(spec(d->port(), kUpstream, R"(, "token_file": ")" + dir + "/right.token\""));
  EXPECT_EQ(values(drain(*ok)).size(), 300u);
}

TEST_F(ServiceSource, OtherProtocolVersionNamesBoth) {
  const std::string ours = make_hello("x").version();
  auto d = start_dispatcher_with();
  // A consumer of another protocol, as the dispatcher sees it.
  auto channel = default_transport()->open_channel("127.0.0.1:" + std::to_string(d->port()));
  JobRequest request;
  request.mutable_hello()->set_protocol(2);
  request.mutable_hello()->set_version("9.9.9");
  request.mutable_hello()->set_name("consumer");
  request.mutable_spec()->set_name("train");
  request.mutable_spec()->set_sharding(JobSpec::OFF);
  std::string e;
  try {
    channel->unary(kGetOrCreateJob, request.SerializeAsString());
  } catch (const CallError& c) {
    e = c.detail();
  }
  EXPECT_CONTAINS(e,
                  "consumer (job 'train') speaks service protocol 2 (dataecho 9.9.9), this "
                  "dispatcher 1 (dataecho " +
                      ours + ")");
  // A dispatcher of another protocol, as the consumer sees it.
  Handlers h;
  h.unary = [](const std::string&, std::string_view) {
    JobReply reply;
    reply.mutable_hello()->set_protocol(2);
    reply.mutable_hello()->set_version("9.9.9");
    reply.mutable_hello()->set_name("dispatcher");
    return reply.SerializeAsString();
  };
  auto other = default_transport()->start_server("127.0.0.1:0", {}, "", h);
  auto p = build(spec(other->port(), kUpstream));
  e = error_of([&] { p->next(); });
  EXPECT_CONTAINS(e, "dispatcher 127.0.0.1:" + std::to_string(other->port()) +
                         " speaks service protocol 2 (dataecho 9.9.9), this consumer 1 (dataecho " +
                         ours + ")");
}

TEST_F(ServiceSource, AWorkerThatCannotBuildTheUpstreamIsNamed) {
  auto d = start_dispatcher_with();
  auto w = start_worker_at(d->port());
  const std::string upstream =
      R"({"source": {"kind": "range", "count": 10}, "stages": [{"op": "map", "fn": "blur"}]})";
  auto p = build(spec(d->port(), upstream));
  const std::string e = error_of([&] { drain(*p); });
  EXPECT_CONTAINS(e, "worker w1 (" + w->address() + ") cannot build the upstream");
  EXPECT_CONTAINS(e, "$.stages[0].fn");
  EXPECT_CONTAINS(e, "blur");
}

TEST_F(ServiceSource, AWorkerThatStopsMidEpochIsNamed) {
  auto d = start_dispatcher_with();
  auto w = start_worker_at(d->port());
  auto p = build(spec(d->port(), R"({"source": {"kind": "range", "count": 100000000}})",
                      R"(, "buffer_mb": 1)"));
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(p->next().has_value());
  w->stop();
  const std::string e = error_of([&] {
    while (p->next()) {
    }
  });
  EXPECT_CONTAINS(e, "worker w1 (" + w->address() + "): ");
}

TEST_F(ServiceSource, AJobNameWithAnotherUpstreamIsRefused) {
  auto d = start_dispatcher_with();
  auto w = start_worker_at(d->port());
  auto first = build(spec(d->port(), kUpstream));
  EXPECT_EQ(values(drain(*first)).size(), 300u);
  auto second = build(spec(d->port(), R"({"source": {"kind": "range", "count": 5}})"));
  const std::string e = error_of([&] { second->next(); });
  EXPECT_CONTAINS(e, "refused job 'train'");
  EXPECT_CONTAINS(e, "job 'train' exists with another upstream");
}

TEST_F(ServiceSource, AStoppedJobsNameIsFreeAgain) {
  auto d = start_dispatcher_with();
  auto w = start_worker_at(d->port());
  const std::string dispatcher = "127.0.0.1:" + std::to_string(d->port());
  EXPECT_EQ(values(drain(*build(spec(d->port(), kUpstream)))).size(), 300u);
  EXPECT_EQ(stop_job(dispatcher, "train", "", 5), 1);
  EXPECT_EQ(service_status(dispatcher, "", 5)["jobs"].size(), 0u);
  auto other = build(spec(d->port(), R"({"source": {"kind": "range", "count": 5}})"));
  EXPECT_EQ(values(drain(*other)), dataecho::testing::iota(5));
  EXPECT_CONTAINS(error_of([&] { stop_job(dispatcher, "eval", "", 5); }),
                  "cannot stop job 'eval': no running job 'eval'");
}

// The timeout covers the dispatcher's first answers too (the job, the rewind): 2 s, not
// less, so that a loaded machine (a sanitizer build beside a compile) still gets them.
TEST_F(ServiceSource, NoWorkerWithinTheTimeoutIsSaid) {
  auto d = start_dispatcher_with();
  auto p = build(spec(d->port(), kUpstream, R"(, "connect_timeout_s": 2)"));
  const std::string e = error_of([&] { p->next(); });
  EXPECT_CONTAINS(e, "no worker has joined the dispatcher at 127.0.0.1:" +
                         std::to_string(d->port()) + " within 2 s");
}

// The status: jobs (a dynamic one with its epoch's pieces by status) and workers (state,
// elements, their rate, pieces leased), as JSON and text.
TEST_F(ServiceSource, StatusListsJobsAndWorkers) {
  DispatcherOptions o;
  o.bind = "127.0.0.1";
  auto d = start_service_dispatcher(o);  // with the plan builder, for sharding "dynamic"
  auto w = start_worker_at(d->port());
  auto p = build(spec(d->port(), kUpstream));
  EXPECT_EQ(values(drain(*p)).size(), 300u);
  std::string dynamic = spec(d->port(), R"({"source": {"kind": "range", "count": 300}})",
                             R"(, "sharding": "dynamic", "lanes": 2)");
  dynamic.replace(dynamic.find("\"train\""), 7, "\"dyn\"");
  EXPECT_EQ(values(drain(*build(dynamic))).size(), 300u);
  const auto s = service_status("127.0.0.1:" + std::to_string(d->port()), "", 5);
  ASSERT_EQ(s["jobs"].size(), 2u);
  EXPECT_EQ(s["jobs"][0]["name"], "train");
  EXPECT_EQ(s["jobs"][0]["sharding"], "off");
  EXPECT_EQ(s["jobs"][0]["epochs"].size(), 0u);
  ASSERT_EQ(s["jobs"][1]["epochs"].size(), 1u) << s.dump();
  const auto& epoch = s["jobs"][1]["epochs"][0];
  const int64_t pieces = epoch["pieces"];
  EXPECT_GE(pieces, 8);  // at least 4 a lane
  EXPECT_EQ(epoch["done"], pieces) << s.dump();
  EXPECT_EQ(epoch["leased"], 0);
  EXPECT_EQ(epoch["pending"], 0);
  ASSERT_EQ(s["workers"].size(), 1u);
  const auto& worker = s["workers"][0];
  EXPECT_EQ(worker["address"], w->address());
  EXPECT_TRUE(worker["alive"].get<bool>());
  EXPECT_EQ(worker["state"], "alive");
  EXPECT_EQ(worker["pieces"], pieces);
  EXPECT_GE(worker["rate"].get<double>(), 0.0);  // of the last interval: not asserted in time
  const std::string text = status_text(s);
  EXPECT_CONTAINS(text, "w1 " + w->address());
  EXPECT_CONTAINS(text, "): alive, last beat ");
  EXPECT_CONTAINS(text, "/s), " + std::to_string(pieces) + " pieces, ");
  EXPECT_CONTAINS(text, "epoch 0: " + std::to_string(pieces) + " pieces, " +
                            std::to_string(pieces) + " done, 0 leased, 0 pending");
}

TEST_F(ServiceSource, SaveIsRefusedInOffMode) {
  auto d = start_dispatcher_with();
  auto w = start_worker_at(d->port());
  auto p = build(spec(d->port(), kUpstream));
  ASSERT_TRUE(p->next().has_value());
  EXPECT_CONTAINS(error_of([&] { p->save(); }), "keeps no position");
}

// Real time: the source waits connect_timeout_s for a dispatcher that is not there.
class ServiceSourceTiming : public ServiceSource {};

TEST_F(ServiceSourceTiming, UnreachableDispatcherFailsWithinTheTimeout) {
  auto p = build(spec(4999, kUpstream, R"(, "connect_timeout_s": 2)"));
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { p->next(); });
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_CONTAINS(e, "cannot reach the dispatcher at 127.0.0.1:4999 within 2 s");
  EXPECT_GE(took, 1.5);
  EXPECT_LT(took, 5.0);
}

}  // namespace
}  // namespace dataecho::service
