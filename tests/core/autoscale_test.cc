// The data service's decision loop (core/autoscale.h) on made-up windows: a fake
// WorkerScaler whose workers serve at once at rates the test sets, and windows of 1 s
// whose counters the test moves. Then a whole Tuner on a ManualClock with a ScalePolicy:
// the echo's cap set, the rules keeping off it, the report and the stats.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/autoscale.h"
#include "dataecho/core/error.h"
#include "dataecho/core/tuner.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho {
namespace {

// Workers that serve as soon as they are asked for, each at rate(n) elements/s where n
// is how many serve.
class FakeScaler : public WorkerScaler {
 public:
  explicit FakeScaler(int64_t serving, std::function<double(int64_t)> rate)
      : serving_(serving), rate_(std::move(rate)) {}
  void set_workers(int64_t n, const std::string& reason) override {
    calls.push_back(n);
    reasons.push_back(reason);
    serving_ = n;
  }
  Rates worker_rates() override {
    Rates r;
    r.serving = serving_;
    r.rates.assign(static_cast<size_t>(serving_), rate_(serving_));
    return r;
  }
  int64_t serving() const { return serving_; }
  std::vector<int64_t> calls;
  std::vector<std::string> reasons;

 private:
  int64_t serving_;
  std::function<double(int64_t)> rate_;
};

// Cachew's rule over a source whose rate is source_rate(n) with n workers serving, a
// consumer that waits while that is below `demand`: windows of 1 s until `until_s`.
struct WorkersRun {
  std::shared_ptr<FakeScaler> scaler;
  ScalePolicy policy;
  int64_t elements = 0;
  double t = 0;
  // The rule's steps on windows of 1 s: judged 2 s after a worker serves.
  WorkersRun(ScaleOptions o, std::function<double(int64_t)> source_rate)
      : scaler(std::make_shared<FakeScaler>(1, [](int64_t) { return 100.0; })),
        policy((o.policy = "workers", o.settle_s = 2, o), scaler),
        rate(std::move(source_rate)) {}
  std::function<double(int64_t)> rate;
  void run(double until_s, double demand) {
    for (; t < until_s;) {
      const double r = rate(scaler->serving());
      t += 1;
      elements += static_cast<int64_t>(r);
      ScaleWindow w;
      w.t_s = t;
      w.dt_s = 1;
      w.consumer_wait = r < demand ? 1 - r / demand : 0;
      w.source_elements = elements;
      w.demand_elements = elements;
      policy.step(w);
    }
  }
};

TEST(ScaleWorkers, AddsWorkersWhileTheRateGrowsAndStopsWhenTheConsumerNoLongerWaits) {
  WorkersRun r(ScaleOptions{}, [](int64_t n) { return std::min(100.0 * n, 250.0); });
  r.run(60, 250);
  // 1 -> 2 (200/s, kept), 2 -> 3 (250/s, kept), then the consumer waits no more.
  EXPECT_EQ(r.scaler->calls, (std::vector<int64_t>{2, 3}));
  const auto report = r.policy.report();
  EXPECT_EQ(report["workers"], 3);
  ASSERT_EQ(report["decisions"].size(), 4u) << report.dump(1);
  EXPECT_NE(report["decisions"][0].get<std::string>().find("workers 3.0 s: workers 1 -> 2"),
            std::string::npos)
      << report.dump(1);
  EXPECT_NE(report["decisions"][3].get<std::string>().find("kept: source 200 -> 250/s"),
            std::string::npos)
      << report.dump(1);
}

TEST(ScaleWorkers, AWorkerThatAddsNoRateIsTakenBackAndTriedAgainLater) {
  ScaleOptions o;
  o.retry_after_s = 30;
  // A shared bottleneck: 205/s however many workers (2.5% over 200: under min_gain).
  WorkersRun r(o, [](int64_t n) { return std::min(100.0 * n, 205.0); });
  r.run(20, 1000);
  EXPECT_EQ(r.scaler->calls, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_NE(r.policy.report()["reason"].get<std::string>().find("taken back: source 200 -> 205/s"),
            std::string::npos)
      << r.policy.report().dump(1);
  r.run(40, 1000);  // blocked for 30 s after the take-back
  EXPECT_EQ(r.scaler->calls.size(), 3u);
  r.run(60, 1000);  // then tried again, and taken back again
  EXPECT_EQ(r.scaler->calls, (std::vector<int64_t>{2, 3, 2, 3, 2}));
}

TEST(ScaleWorkers, StopsAtMaxWorkers) {
  ScaleOptions o;
  o.max_workers = 3;
  WorkersRun r(o, [](int64_t n) { return 100.0 * n; });
  r.run(60, 10'000);
  EXPECT_EQ(r.scaler->calls, (std::vector<int64_t>{2, 3}));
}

// Echo or scale: a demand node that gives `demand` elements per second of its consumer's
// time outside next(), its consumer waiting half of each window.
struct EchoOrScaleRun {
  std::shared_ptr<FakeScaler> scaler;
  ScalePolicy policy;
  int64_t cap = 1;
  int64_t elements = 0;
  double t = 0;
  EchoOrScaleRun(ScaleOptions o, std::function<double(int64_t)> worker_rate)
      : scaler(std::make_shared<FakeScaler>(1, std::move(worker_rate))),
        policy((o.policy = "echo_or_scale", o), scaler) {}
  void run(double until_s, double demand) {
    for (; t < until_s;) {
      t += 1;
      elements += static_cast<int64_t>(demand / 2);
      ScaleWindow w;
      w.t_s = t;
      w.dt_s = 1;
      w.demand_elements = elements;
      w.demand_wait_s = 0.5;
      w.echo_cap = cap;
      w.echo_max = 4;
      const ScaleStep s = policy.step(w);
      cap = s.cap_to;
    }
  }
};

EchoOrScaleInputs inputs(double demand, int64_t workers, double rate, double worker_price) {
  EchoOrScaleInputs in;
  in.demand = demand;
  in.worker_rates.assign(static_cast<size_t>(workers), rate);
  in.worker_price_per_hour = worker_price;
  in.max_workers = 4;
  in.max_factor = 4;
  return in;
}

TEST(ScaleEchoOrScale, TheModelsChoiceIsApplied) {
  EchoOrScaleRun r(ScaleOptions{}, [](int64_t) { return 150.0; });
  r.run(10, 1200);
  const EchoOrScaleChoice best = echo_or_scale(inputs(1200, 1, 150, 0));
  ASSERT_EQ(best.workers, 4);  // free workers: as many as help, then echo for the rest
  ASSERT_DOUBLE_EQ(best.factor, 2);
  EXPECT_EQ(r.scaler->calls, (std::vector<int64_t>{4}));
  EXPECT_EQ(r.cap, 2);
  const auto report = r.policy.report();
  EXPECT_DOUBLE_EQ(report["demand"].get<double>(), 1200);
  EXPECT_DOUBLE_EQ(report["factor"].get<double>(), 2);
  const std::string line = report["decisions"][0];
  // Window 2 gives the first elements; the span after it ends at 4 s.
  EXPECT_NE(line.find("echo-or-scale 4.0 s: workers 1 -> 4, echo cap 1 -> 2 (factor - -> 2, D "
                      "1,200/s, workers 150/s each (1 measured); first decision"),
            std::string::npos)
      << line;
}

TEST(ScaleEchoOrScale, DearWorkersMakeItEchoMore) {
  ScaleOptions o;
  o.worker_price_per_hour = 4;
  EchoOrScaleRun r(o, [](int64_t) { return 150.0; });
  r.run(10, 1200);
  const EchoOrScaleChoice best = echo_or_scale(inputs(1200, 1, 150, 4));
  EXPECT_LT(best.workers, 4);
  EXPECT_EQ(r.scaler->serving(), best.workers);
  EXPECT_EQ(r.cap, static_cast<int64_t>(std::ceil(best.factor - 1e-9)));
  EXPECT_EQ(r.cap, 4);
}

TEST(ScaleEchoOrScale, HysteresisKeepsTheChoiceUntilTheIntervalHasPassed) {
  ScaleOptions o;
  o.min_interval_s = 30;
  double rate = 150;
  EchoOrScaleRun r(o, [&](int64_t) { return rate; });
  r.run(4, 1200);
  ASSERT_EQ(r.scaler->calls, (std::vector<int64_t>{4}));
  // Workers half as fast: echo 4 with the same 4 workers takes 44% less time, but the
  // switch waits until 30 s after the first decision (at 4 s).
  rate = 75;
  r.run(20, 1200);
  EXPECT_EQ(r.scaler->calls, (std::vector<int64_t>{4}));
  EXPECT_EQ(r.cap, 2);
  EXPECT_NE(r.policy.report()["reason"].get<std::string>().find("the last switch was"),
            std::string::npos)
      << r.policy.report().dump(1);
  r.run(40, 1200);
  EXPECT_EQ(r.cap, 4);
  EXPECT_EQ(r.scaler->serving(), echo_or_scale(inputs(1200, 4, 75, 0)).workers);
  const std::string last = r.policy.report()["decisions"].back();
  EXPECT_NE(last.find("echo-or-scale 34.0 s: workers 4 -> 4, echo cap 2 -> 4"), std::string::npos)
      << last;
  EXPECT_NE(
      last.find("switched from 4 workers and echo 2: 4 workers and echo 4 would cost 44.1% less"),
      std::string::npos)
      << last;
}

// Echo or scale over workers of 150/s, fed windows of 1 s by hand: at(t, elements,
// wait_s) is the window ending at t in which the consumer took `elements` and waited
// wait_s.
struct DemandRun {
  explicit DemandRun(ScaleOptions o = {}) : policy((o.policy = "echo_or_scale", o), scaler) {}
  void at(double t, int64_t elements, double wait_s) {
    total += elements;
    policy.step(ScaleWindow{.t_s = t,
                            .dt_s = 1,
                            .demand_elements = total,
                            .demand_wait_s = wait_s,
                            .echo_cap = 1,
                            .echo_max = 4});
  }
  nlohmann::json report() const { return policy.report(); }
  std::shared_ptr<FakeScaler> scaler =
      std::make_shared<FakeScaler>(1, [](int64_t) { return 150.0; });
  ScalePolicy policy;
  int64_t total = 0;
};

// The trainer's start-up (a second building its model, then a slow first step of one
// batch) is no part of D: measuring starts after the window of its first element.
TEST(ScaleEchoOrScale, TheDemandIsMeasuredFromAfterTheFirstElement) {
  DemandRun p;
  p.at(1, 0, 0);    // the first window: the counters' base
  p.at(2, 0, 0);    // the model is built
  p.at(3, 128, 0);  // one batch, its step slow
  for (int t = 4; t <= 5; ++t) p.at(t, 600, 0.5);
  const auto report = p.report();
  EXPECT_DOUBLE_EQ(report["demand"].get<double>(), 1200) << report.dump(1);
  ASSERT_EQ(report["decisions"].size(), 1u) << report.dump(1);
  EXPECT_NE(report["decisions"][0].get<std::string>().find("echo-or-scale 5.0 s:"),
            std::string::npos)
      << report.dump(1);
}

// A consumer that waits 94% of the time: the span grows until it holds measure_s / 4 of
// the consumer's time outside next() (0.5 s: 9 windows of 0.06 s), and D is its pace.
TEST(ScaleEchoOrScale, AConsumerThatNearlyAlwaysWaitsIsMeasuredOverALongerSpan) {
  DemandRun p;
  p.at(1, 0, 0);
  p.at(2, 60, 0.94);  // the first elements
  for (int t = 3; t <= 10; ++t) p.at(t, 60, 0.94);
  EXPECT_TRUE(p.report()["demand"].is_null()) << p.report().dump(1);  // 0.48 s so far
  p.at(11, 60, 0.94);
  EXPECT_NEAR(p.report()["demand"].get<double>(), 1000, 1e-6) << p.report().dump(1);
}

// D is taken over the spans of the last min_interval_s: one span at 10x the pace moves it
// by a fraction, and it is forgotten once min_interval_s has passed.
TEST(ScaleEchoOrScale, TheDemandIsTakenOverTheLastInterval) {
  ScaleOptions o;
  o.min_interval_s = 20;
  DemandRun p(o);
  p.at(1, 0, 0);
  p.at(2, 600, 0.5);
  for (int t = 3; t <= 22; ++t) p.at(t, 600, 0.5);
  EXPECT_DOUBLE_EQ(p.report()["demand"].get<double>(), 1200);
  // A span (2 windows) at 12,000/s: 10 spans of the last 20 s, 9 at 1,200/s.
  for (int t = 23; t <= 24; ++t) p.at(t, 6000, 0.5);
  EXPECT_NEAR(p.report()["demand"].get<double>(), (9 * 1200.0 + 12'000) / 10, 1e-6);
  for (int t = 25; t <= 44; ++t) p.at(t, 600, 0.5);
  EXPECT_DOUBLE_EQ(p.report()["demand"].get<double>(), 1200);
}

TEST(ScaleEchoOrScale, NoDecisionWithoutAMeasuredWorker) {
  EchoOrScaleRun r(ScaleOptions{}, [](int64_t) { return 0.0; });
  r.run(10, 1200);
  EXPECT_TRUE(r.scaler->calls.empty());
  EXPECT_TRUE(r.policy.report()["decisions"].empty());
}

TEST(ScaleEchoOrScale, TheScalersErrorIsReportedOnceAndTriedAgain) {
  class Failing : public FakeScaler {
   public:
    Failing() : FakeScaler(1, [](int64_t) { return 150.0; }) {}
    Rates worker_rates() override {
      if (fail) throw Error(ErrorCode::kIo, "scale", "the dispatcher at h:1 gives no status");
      return FakeScaler::worker_rates();
    }
    bool fail = true;
  };
  auto scaler = std::make_shared<Failing>();
  ScaleOptions o;
  o.policy = "echo_or_scale";
  ScalePolicy p(o, scaler);
  int64_t elements = 0, cap = 1;
  for (int t = 1; t <= 12; ++t) {
    if (t == 9) scaler->fail = false;
    elements += 600;
    ScaleWindow w{.t_s = double(t),
                  .dt_s = 1,
                  .demand_elements = elements,
                  .demand_wait_s = 0.5,
                  .echo_cap = cap,
                  .echo_max = 4};
    cap = p.step(w).cap_to;
  }
  const auto report = p.report();
  ASSERT_EQ(report["decisions"].size(), 2u) << report.dump(1);
  EXPECT_NE(report["decisions"][0].get<std::string>().find("gives no status"), std::string::npos);
  EXPECT_EQ(scaler->calls, (std::vector<int64_t>{4}));
}

TEST(ScaleOptionsCheck, BadOptionsAreRefusedNamingTheField) {
  ScaleOptions o;
  o.policy = "sometimes";
  EXPECT_THROW(check_scale_options(o, "$.source.scale"), Error);
  o.policy = "workers";
  o.echo_value = {{2, 2.5}};
  try {
    check_scale_options(o, "$.source.scale");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("$.source.scale.echo_value[0]"), std::string::npos) << e.message();
  }
  o.echo_value = default_echo_value();
  o.worker_price_per_hour = 0;
  o.trainer_price_per_hour = 0;
  EXPECT_THROW(check_scale_options(o, "$.source.scale"), Error);
  o.trainer_price_per_hour = 1;
  o.policy = "fixed";
  EXPECT_THROW(ScalePolicy(o, std::make_shared<FakeScaler>(1, [](int64_t) { return 1.0; })), Error);
}

// ---------------------------------------------------------------- in the tuner

// A tuner with a tuned echo (cap 1 of 4) after a service source, workers of 150/s each
// (FakeScaler), and the echo-or-scale policy; run() feeds it 40 windows of 0.25 s in
// which the echo gives 150 elements, its consumer waits echo_wait_ns in it and the
// pipeline's consumer output_wait_ns at the output.
struct ScaleRig {
  explicit ScaleRig(const std::string& output_label)
      : output(std::make_shared<NodeStats>(output_label)), tuner(options(clock), output) {
    ScaleOptions o;
    o.policy = "echo_or_scale";
    policy = std::make_shared<ScalePolicy>(o, scaler);
    tuner.add(echo, echo_stats);
  }
  static TunerOptions options(const std::shared_ptr<ManualClock>& clock) {
    TunerOptions to;
    to.cpu_budget = 8;
    to.ram_budget_bytes = int64_t{1} << 30;
    to.clock = clock;
    return to;
  }
  void run(int64_t echo_wait_ns, int64_t output_wait_ns) {
    for (int i = 0; i < 40; ++i) {
      clock->advance_seconds(0.25);
      echo_stats->elements += 150;
      echo_stats->next_ns += echo_wait_ns;
      output->next_ns += output_wait_ns;
      source->elements += 75;
      tuner.step();
    }
  }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<NodeStats> output;
  Tuner tuner;
  std::shared_ptr<Knob> echo = std::make_shared<Knob>(
      Knob::Kind::kEcho, "max_copies", 1, 1, 4, [](int64_t) { return 2049; }, 0);
  std::shared_ptr<NodeStats> echo_stats = std::make_shared<NodeStats>("2:echo(auto)", true);
  std::shared_ptr<NodeStats> source = std::make_shared<NodeStats>("0:service", true);
  std::shared_ptr<FakeScaler> scaler =
      std::make_shared<FakeScaler>(1, [](int64_t) { return 150.0; });
  std::shared_ptr<ScalePolicy> policy;
};

TEST(TunerScale, TheTunerFeedsThePolicyAndSetsTheEchosCap) {
  ScaleRig rig("3:batch");
  rig.tuner.add_scaler(rig.policy, rig.source);
  rig.tuner.add_scaler(rig.policy, rig.source);  // a second add: a no-op
  // The consumer waits half the time at the output and at the echo: the tuner's rule 5
  // would raise the echo's cap to 4; the policy sets it to 2 instead.
  rig.run(125'000'000, 125'000'000);
  EXPECT_EQ(rig.echo->value(), 2);
  EXPECT_EQ(rig.scaler->calls, (std::vector<int64_t>{4}));
  const auto report = rig.tuner.report();
  ASSERT_TRUE(report.contains("scale")) << report.dump(1);
  EXPECT_EQ(report["scale"]["workers"], 4);
  bool workers = false, cap = false;
  for (const auto& c : report["changes"]) {
    const std::string reason = c["reason"];
    // Only the policy moves the cap (the rules would have raised it to 4).
    EXPECT_EQ(reason.rfind("echo-or-scale ", 0), 0u) << report.dump(1);
    workers = workers || (c["param"] == "workers" && c["node"] == "0:service" && c["to"] == 4);
    cap = cap || (c["param"] == "max_copies" && c["node"] == "2:echo(auto)" && c["to"] == 2);
  }
  EXPECT_TRUE(cap) << report.dump(1);
  EXPECT_TRUE(workers) << report.dump(1);
  const auto values = rig.source->values();
  EXPECT_EQ(values.at("scale_workers"), 4);
  EXPECT_EQ(values.at("scale_factor"), 2);
  EXPECT_DOUBLE_EQ(values.at("scale_demand"), 1200);
  EXPECT_EQ(rig.echo_stats->values().at("max_copies"), 2);
}

// The echo's consumer is a prefetch thread that waits in the echo 90% of the time, while
// the trainer waits at the output half of it: D is the trainer's pace (150 elements a
// quarter second of its 0.125 s outside next(): 1,200/s), not 150 over the prefetch
// thread's 0.025 s (6,000/s).
TEST(TunerScale, TheDemandIsTheTrainersPaceNotTheEchoConsumersPace) {
  ScaleRig rig("5:prefetch");
  rig.tuner.add_scaler(rig.policy, rig.source);
  rig.run(225'000'000, 125'000'000);
  EXPECT_DOUBLE_EQ(rig.source->values().at("scale_demand"), 1200);
  EXPECT_EQ(rig.scaler->calls, (std::vector<int64_t>{4}));
  EXPECT_EQ(rig.echo->value(), 2);
}

// ---------------------------------------------------------------- the spec's "scale"

nlohmann::json service_spec(const std::string& sharding, nlohmann::json scale) {
  nlohmann::json source = {{"kind", "service"},
                           {"dispatcher", "127.0.0.1:1"},
                           {"job", "j"},
                           {"sharding", sharding},
                           {"pipeline", {{"source", {{"kind", "range"}, {"count", 10}}}}}};
  if (!scale.is_null()) source["scale"] = std::move(scale);
  return {{"source", source}};
}

std::string build_error(const nlohmann::json& spec) {
  try {
    PipelineDef::from_json(spec).build();
  } catch (const Error& e) {
    return e.message();
  }
  return "(built)";
}

TEST(ScaleSpec, APolicyNeedsShardingDynamicOrStatic) {
  const std::string e = build_error(service_spec("off", {{"policy", "workers"}}));
  EXPECT_NE(e.find("$.source.scale.policy: policy \"workers\" needs sharding \"dynamic\""),
            std::string::npos)
      << e;
}

TEST(ScaleSpec, ABadCurveOrFieldIsRefusedNamingIt) {
  std::string e = build_error(service_spec(
      "dynamic", {{"policy", "echo_or_scale"},
                  {"echo_value", nlohmann::json::array({nlohmann::json::array({2, 2.5})})}}));
  EXPECT_NE(e.find("$.source.scale.echo_value[0]"), std::string::npos) << e;
  e = build_error(service_spec("dynamic", {{"policy", "echo_or_scale"}, {"max_worker", 2}}));
  EXPECT_NE(e.find("max_worker"), std::string::npos) << e;
  e = build_error(service_spec("dynamic", {{"policy", "sometimes"}}));
  EXPECT_NE(e.find("$.source.scale.policy"), std::string::npos) << e;
}

TEST(ScaleSpec, ScaleIsOutOfTheStateFingerprint) {
  EXPECT_EQ(
      PipelineDef::from_json(service_spec("dynamic", nullptr)).fingerprint(),
      PipelineDef::from_json(service_spec("dynamic", {{"policy", "echo_or_scale"}})).fingerprint());
}

}  // namespace
}  // namespace dataecho
