// The launcher's decisions (src/service/launcher.h) with a fake process starter and a
// made-up clock: commands and their fields, scaling up and down, registration, failed
// launches and their retries.
#include "service/launcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace dataecho::service {
namespace {

// Processes that run until the test ends them.
class FakeProcesses final : public Processes {
 public:
  int64_t start(const LaunchCommand& c) override {
    if (fail_start) throw std::runtime_error("no such host");
    started.push_back(c);
    return 100 + static_cast<int64_t>(started.size());
  }
  std::optional<ProcessExit> poll(int64_t pid) override {
    const auto e = exits.find(pid);
    if (e == exits.end()) return std::nullopt;
    return e->second;
  }
  std::vector<LaunchCommand> started;
  std::map<int64_t, ProcessExit> exits;  // by pid
  bool fail_start = false;
};

class LauncherTest : public ::testing::Test {
 protected:
  Launcher& make(LaunchOptions o = {}) {
    o.exe = "/opt/dataecho";
    launcher_ = std::make_unique<Launcher>(o, "127.0.0.1", 5050, "s3cret", processes_,
                                           [this] { return now_; });
    return *launcher_;
  }
  std::shared_ptr<FakeProcesses> processes_ = std::make_shared<FakeProcesses>();
  int64_t now_ = 1000;
  std::unique_ptr<Launcher> launcher_;
};

std::string contents(const LaunchCommand& c) {
  std::string s;
  for (const auto& a : c.argv) s += a + " ";
  return s + c.shown;
}

TEST(LaunchTemplate, PutsInTheFieldsShellQuoted) {
  EXPECT_EQ(expand_template("ssh {host} {exe} worker --dispatcher {dispatcher} # {index} {other}",
                            "10.0.0.2:5050", "node7", 3, "/usr/bin/dataecho"),
            "ssh 'node7' '/usr/bin/dataecho' worker --dispatcher '10.0.0.2:5050' # '3' {other}");
  EXPECT_EQ(expand_template("echo {host}", "d", "it's; rm -rf /", 1, "e"),
            "echo 'it'\\''s; rm -rf /'");
  EXPECT_EQ(expand_template("echo ${HOME} {", "d", "h", 1, "e"), "echo ${HOME} {");
}

TEST_F(LauncherTest, TheDefaultCommandIsALocalWorkerAndTheTokenIsInItsEnvironment) {
  LaunchOptions o;
  o.tls_cert_file = "c.pem";
  o.tls_key_file = "c.key";
  o.ca_file = "ca.pem";
  const LaunchCommand c = make(o).command(2, "localhost");
  EXPECT_EQ(c.argv,
            (std::vector<std::string>{"/opt/dataecho", "worker", "--dispatcher", "127.0.0.1:5050",
                                      "--bind", "127.0.0.1", "--tls-cert", "c.pem", "--tls-key",
                                      "c.key", "--ca-file", "ca.pem"}));
  EXPECT_EQ(c.label, "launch 2");
  const std::vector<std::pair<std::string, std::string>> env = {
      {"DATAECHO_LAUNCH_INDEX", "2"}, {"DATAECHO_SERVICE_TOKEN", "s3cret"}};
  EXPECT_EQ(c.env, env);
  EXPECT_EQ(contents(c).find("s3cret"), std::string::npos);
}

TEST_F(LauncherTest, ATemplateRunsInAShellWithItsHostRoundRobin) {
  LaunchOptions o;
  o.launch = "ssh {host} dataecho worker --dispatcher {dispatcher} --launch-index {index}";
  o.hosts = {"a", "b"};
  o.advertise = "head";
  Launcher& l = make(o);
  EXPECT_EQ(
      l.command(1, "a").argv,
      (std::vector<std::string>{
          "/bin/sh", "-c", "ssh 'a' dataecho worker --dispatcher 'head:5050' --launch-index '1'"}));
  EXPECT_EQ(l.command(2, "b").shown,
            "ssh 'b' dataecho worker --dispatcher 'head:5050' --launch-index '2'");
  EXPECT_EQ(l.host(3), "a");
  EXPECT_EQ(contents(l.command(3, "a")).find("s3cret"), std::string::npos);
}

TEST_F(LauncherTest, AHostAWorkerLeftIsUsedAgainBeforeAnyHostGetsTwo) {
  LaunchOptions o;
  o.launch = "ssh {host} dataecho worker --dispatcher {dispatcher}";
  o.hosts = {"a", "b", "c"};
  Launcher& l = make(o);
  l.set_target(3, "test");
  l.step({});
  EXPECT_FALSE(l.registered(1, 1));
  EXPECT_FALSE(l.registered(2, 2));
  EXPECT_FALSE(l.registered(3, 3));
  l.set_target(2, "test");
  EXPECT_EQ(l.step({{1, true}, {2, true}, {3, true}}), (std::vector<int64_t>{3}));
  now_ += 2500;
  processes_->exits[103] = {0, ""};  // launch 3, on c, left
  l.step({{1, true}, {2, true}});
  EXPECT_EQ(l.status().launched(2).ran_ms(), 2500);
  l.set_target(3, "test");
  l.step({{1, true}, {2, true}});
  ASSERT_EQ(processes_->started.size(), 4u);
  EXPECT_EQ(l.status().launched(3).host(), "c");  // not a, the round robin's turn
  EXPECT_EQ(processes_->started[3].shown, "ssh 'c' dataecho worker --dispatcher '127.0.0.1:5050'");
}

TEST_F(LauncherTest, ScalesUpCountingWorkersItDidNotLaunch) {
  Launcher& l = make();
  EXPECT_TRUE(l.step({{1, true}}).empty());  // no target: nothing launched
  EXPECT_TRUE(processes_->started.empty());
  l.set_target(3, "test");
  l.step({{1, true}, {2, false}});  // w1 counts, w2 (leaving or silent) does not
  ASSERT_EQ(processes_->started.size(), 2u);
  EXPECT_EQ(l.counted(), 3);
  l.step({{1, true}, {2, false}});  // starting launches count: no more
  EXPECT_EQ(processes_->started.size(), 2u);
  const LaunchStatus s = l.status();
  EXPECT_EQ(s.target(), 3);
  EXPECT_EQ(s.reason(), "test");
  ASSERT_EQ(s.launched_size(), 2);
  EXPECT_EQ(s.launched(0).state(), "starting");
  EXPECT_EQ(s.launched(1).pid(), 102);
}

TEST_F(LauncherTest, ScalesDownAskingTheNewestLaunchedToLeave) {
  Launcher& l = make();
  l.set_target(3, "test");
  l.step({{1, true}});
  EXPECT_FALSE(l.registered(1, 2));
  EXPECT_FALSE(l.registered(2, 3));
  l.set_target(1, "test");
  // Launches 2 (w3) and 1 (w2), newest first; w1, not launched, is never asked.
  EXPECT_EQ(l.step({{1, true}, {2, true}, {3, true}}), (std::vector<int64_t>{2, 3}));
  l.set_target(0, "test");
  EXPECT_TRUE(l.step({{1, true}, {2, false}, {3, false}}).empty());
  EXPECT_NE(l.status().note().find("did not launch"), std::string::npos) << l.status().note();
  EXPECT_EQ(l.status().launched(1).state(), "leaving");
  processes_->exits[102] = {0, ""};
  l.step({{1, true}});
  EXPECT_EQ(l.status().launched(1).state(), "exited");
  EXPECT_EQ(l.status().launched(1).exit_status(), 0);
  EXPECT_EQ(processes_->started.size(), 2u);  // none launched again
}

TEST_F(LauncherTest, ALaunchAskedToLeaveWhileStartingLeavesWhenItRegisters) {
  Launcher& l = make();
  l.set_target(2, "test");
  l.step({});
  l.set_target(1, "test");
  EXPECT_TRUE(l.step({}).empty());  // neither registered yet: launch 2 is marked
  EXPECT_FALSE(l.registered(1, 1));
  EXPECT_TRUE(l.registered(2, 2));                      // to leave at once
  EXPECT_TRUE(l.step({{1, true}, {2, true}}).empty());  // told already
}

TEST_F(LauncherTest, AFailedLaunchIsReportedAndRetriedAtMostRetriesTimes) {
  LaunchOptions o;
  o.retries = 1;
  Launcher& l = make(o);
  l.set_target(1, "test");
  l.step({});
  processes_->exits[101] = {3, "cannot reach node7"};
  l.step({});  // reaped: failed; launched again
  processes_->exits[102] = {3, "cannot reach node7"};
  l.step({});
  l.step({});
  EXPECT_EQ(processes_->started.size(), 2u);
  const LaunchStatus s = l.status();
  EXPECT_EQ(s.failures(), 2);
  EXPECT_NE(s.note().find("launching stopped after 2 failed launches"), std::string::npos)
      << s.note();
  EXPECT_EQ(s.launched(0).state(), "failed");
  EXPECT_EQ(s.launched(0).exit_status(), 3);
  EXPECT_EQ(s.launched(0).last_line(), "cannot reach node7");
  EXPECT_NE(s.launched(0).why().find("exited with status 3 before its worker registered"),
            std::string::npos);
  l.set_target(1, "again");  // a new target tries again
  l.step({});
  EXPECT_EQ(processes_->started.size(), 3u);
}

TEST_F(LauncherTest, ALaunchThatDoesNotRegisterInTimeFails) {
  LaunchOptions o;
  o.register_timeout_s = 5;
  o.retries = 0;
  Launcher& l = make(o);
  l.set_target(1, "test");
  l.step({});
  now_ += 4000;
  l.step({});
  EXPECT_EQ(l.status().launched(0).state(), "starting");
  now_ += 2000;
  l.step({});
  EXPECT_EQ(l.status().launched(0).state(), "failed");
  EXPECT_NE(l.status().launched(0).why().find("did not register within 5"), std::string::npos);
  EXPECT_EQ(processes_->started.size(), 1u);  // retries 0
  EXPECT_FALSE(l.registered(1, 4));           // late: it serves after all
  EXPECT_EQ(l.status().launched(0).state(), "running");
}

TEST_F(LauncherTest, AProcessThatCannotStartFails) {
  LaunchOptions o;
  o.retries = 0;
  Launcher& l = make(o);
  processes_->fail_start = true;
  l.set_target(1, "test");
  l.step({});
  EXPECT_EQ(l.status().launched(0).state(), "failed");
  EXPECT_NE(l.status().launched(0).why().find("cannot start: no such host"), std::string::npos);
}

TEST_F(LauncherTest, RefusesATargetOverMaxWorkers) {
  LaunchOptions o;
  o.max_workers = 4;
  Launcher& l = make(o);
  EXPECT_THROW(l.set_target(5, "test"), std::exception);
  EXPECT_THROW(l.set_target(-1, "test"), std::exception);
  try {
    l.set_target(5, "test");
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("at most 4 workers (the dispatcher's --max-workers)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dataecho::service
