// The data service as separate processes over gRPC on 127.0.0.1: `dataecho dispatcher`,
// `dataecho worker` and `dataecho pipe` on a spec with a `service` source, each started
// as a person starts it, the ports read from the lines they print. Skipped where the build
// has no gRPC plugin (TSan builds, or no libgrpc++-dev), as the transport's tests are.
// The fixture is processes_fixture.h's; sharding "static"'s tests are
// processes_static_test.cc.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "service/processes_fixture.h"

namespace dataecho::service {
namespace {

using process_test::Child;
using process_test::dispatcher_address;
using process_test::each_id_once;
using process_test::ids_of_lines;
using process_test::kDataecho;
using process_test::read_text;
using process_test::run_output;
using process_test::ServiceProcesses;
using process_test::write_file;
using process_test::write_images;

TEST_F(ServiceProcesses, OneWorkerGivesTheSourcesIdsOnce) {
  Child worker({kDataecho, "worker", "--dispatcher", address, "--bind", "127.0.0.1"},
               dir + "/worker.log");
  const auto serving = worker.line();
  ASSERT_TRUE(serving && serving->rfind("worker w1 serving on 127.0.0.1:", 0) == 0)
      << serving.value_or("(nothing)") << "; " << read_text(dir + "/worker.log");

  write_images(dir + "/images.idx", 2000);
  write_spec();
  int status = 0;
  const std::string out =
      run_output({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log", &status);
  EXPECT_EQ(status, 0) << read_text(dir + "/pipe.log");
  ASSERT_TRUE(each_id_once(ids_of_lines(out), 2000)) << read_text(dir + "/pipe.log");

  // The worker's count reaches the dispatcher with its next beat (every 0.5 s).
  nlohmann::json s;
  for (int tries = 0; tries < 40; ++tries) {
    const std::string text = run_output({kDataecho, "service", "status", address, "--json"},
                                        dir + "/status.log", &status);
    ASSERT_EQ(status, 0) << read_text(dir + "/status.log");
    s = nlohmann::json::parse(text);
    if (s["workers"].size() == 1 && s["workers"][0]["elements"] == 2000) break;
    usleep(250'000);
  }
  ASSERT_EQ(s["jobs"].size(), 1u) << s.dump();
  EXPECT_EQ(s["jobs"][0]["name"], "ids");
  ASSERT_EQ(s["workers"].size(), 1u) << s.dump();
  EXPECT_EQ(s["workers"][0]["elements"], 2000) << s.dump();

  // SIGTERM stops both cleanly.
  EXPECT_EQ(worker.terminate(), 0) << read_text(dir + "/worker.log");
  EXPECT_EQ(dispatcher().terminate(), 0) << read_text(dir + "/dispatcher.log");
}

// Sharding "dynamic" over three worker processes, one SIGKILLed mid-epoch (its upstream
// sleeps 0.2 ms an element, so each worker is in its first piece): the consumer (a
// `dataecho pipe`) releases its lease at the records it kept, another worker reads the
// piece on from there, and the epoch has each of the source's ids once.
TEST_F(ServiceProcesses, WorkerSigkilledMidEpoch) {
  auto workers = start_workers(3);
  if (HasFailure()) return;
  write_dynamic_spec();
  Child pipe({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log");
  std::string out;
  for (int i = 0; i < 450; ++i) {  // each worker in its first piece
    const auto l = pipe.line(60);
    ASSERT_TRUE(l) << read_text(dir + "/pipe.log");
    out += *l + "\n";
  }
  workers[1]->kill_now();
  while (auto l = pipe.line(120)) out += *l + "\n";
  EXPECT_EQ(pipe.terminate(), 0) << read_text(dir + "/pipe.log");
  EXPECT_NE(read_text(dir + "/pipe.log").find("service: worker w2 ("), std::string::npos)
      << read_text(dir + "/pipe.log");
  ASSERT_TRUE(each_id_once(ids_of_lines(out), kImages)) << read_text(dir + "/pipe.log");
}

// Sharding "dynamic" with the dispatcher on a journal, SIGKILLed mid-epoch and started
// again on the same port and journal half a second later: the workers ask for their next
// pieces and the consumer reports again until it answers, the replayed leases and done
// pieces stand, and the epoch has each of the source's ids once.
TEST_F(ServiceProcesses, DispatcherSigkilledAndRestartedOnItsJournal) {
  const std::string journal = dir + "/journal";
  start_dispatcher({"--port", "0", "--journal", journal});
  const std::string port = address.substr(address.rfind(':') + 1);
  auto workers = start_workers(3);
  if (HasFailure()) return;
  write_dynamic_spec();
  Child pipe({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log");
  std::string out;
  for (int i = 0; i < 450; ++i) {  // each worker in its first piece
    const auto l = pipe.line(60);
    ASSERT_TRUE(l) << read_text(dir + "/pipe.log");
    out += *l + "\n";
  }
  dispatcher().kill_now();
  usleep(500'000);
  start_dispatcher({"--port", port, "--journal", journal});
  while (auto l = pipe.line(120)) out += *l + "\n";
  EXPECT_EQ(pipe.terminate(), 0) << read_text(dir + "/pipe.log");
  ASSERT_TRUE(each_id_once(ids_of_lines(out), kImages))
      << read_text(dir + "/pipe.log") << read_text(dir + "/worker1.log");
}

// `dataecho pipe --save-every 500` of a dynamic job SIGKILLed mid-epoch, then run again
// from the state it saved last: what the killed run printed after that save is dropped
// (as a trainer drops the steps after its checkpoint), and the rest of its lines with
// the resumed run's are the source's ids once each. The resumed run must start at one of
// the killed run's saves: its lines are the complement of a prefix of 500 k lines.
TEST_F(ServiceProcesses, PipeSigkilledAndResumedWithSaveEvery) {
  auto workers = start_workers(3);
  if (HasFailure()) return;
  write_dynamic_spec();
  const std::string state = dir + "/state";
  std::vector<std::string> killed;
  {
    Child pipe(
        {kDataecho, "pipe", dir + "/spec.json", "--save-state", state, "--save-every", "500"},
        dir + "/pipe.log");
    for (int i = 0; i < 2200; ++i) {
      const auto l = pipe.line(60);
      ASSERT_TRUE(l) << read_text(dir + "/pipe.log");
      killed.push_back(*l);
    }
    pipe.kill_now();
    while (auto l = pipe.line(5)) killed.push_back(*l);  // what it printed before it died
  }
  EXPECT_NE(read_text(dir + "/pipe.log").find("pipe: state saved after 2000 elements"),
            std::string::npos)
      << read_text(dir + "/pipe.log");
  int status = 0;
  const std::string resumed =
      run_output({kDataecho, "pipe", dir + "/spec.json", "--restore-state", state},
                 dir + "/resumed.log", &status);
  EXPECT_EQ(status, 0) << read_text(dir + "/resumed.log");
  std::vector<int64_t> ids = ids_of_lines(resumed);
  ASSERT_LT(ids.size(), kImages);
  const size_t prefix = kImages - ids.size();
  EXPECT_EQ(prefix % 500, 0u);
  EXPECT_GE(prefix, 2000u);
  ASSERT_LE(prefix, killed.size());
  for (size_t i = 0; i < prefix; ++i) ids.push_back(nlohmann::json::parse(killed[i])["ids"][0]);
  std::sort(ids.begin(), ids.end());
  ASSERT_TRUE(each_id_once(ids, kImages)) << read_text(dir + "/resumed.log");
}

// The status of the dispatcher at `address` as JSON; its entry of worker `number`.
nlohmann::json status_of_worker(const std::string& address, int64_t number,
                                const std::string& log) {
  int status = 0;
  const std::string text =
      run_output({kDataecho, "service", "status", address, "--json"}, log, &status);
  const auto s = nlohmann::json::parse(text, nullptr, false);
  if (s.is_discarded()) return nullptr;
  for (const auto& w : s["workers"])
    if (w["worker"] == number) return w;
  return nullptr;
}

// Sharding "dynamic" while workers come and go: one worker at the start; a second one
// started after a quarter of the epoch, which the consumer (reading the workers listed
// when it started) learns of from the dispatcher and reads from: it takes pending
// pieces; once it has, `dataecho service stop-worker` asks the first to leave, which
// finishes its piece, takes no other, and exits by itself with status 0. The epoch has
// each of the source's ids once; the status says the first "left" and the second got
// pieces. SIGTERM makes the second leave (status 0) too.
TEST_F(ServiceProcesses, AWorkerJoinsAndLeavesMidEpoch) {
  auto workers = start_workers(1);
  if (HasFailure()) return;
  constexpr uint32_t kCount = 2000;
  write_images(dir + "/images.idx", kCount);
  write_spec({{"sharding", "dynamic"},
              {"lanes", 6},
              {"buffer_mb", 1},
              {"stages", {{{"op", "map"}, {"fn", "sleep"}, {"args", {{"ms", 1}}}}}}});
  Child pipe({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log");
  std::string out;
  std::unique_ptr<Child> second;
  bool asked = false;
  for (int i = 0;; ++i) {
    const auto l = pipe.line(60);
    if (!l) break;
    out += *l + "\n";
    if (i == kCount / 4) {
      second = std::make_unique<Child>(std::vector<std::string>{kDataecho, "worker", "--dispatcher",
                                                                address, "--bind", "127.0.0.1"},
                                       dir + "/worker2.log");
      const auto serving = second->line();
      ASSERT_TRUE(serving && serving->rfind("worker w2 serving on 127.0.0.1:", 0) == 0)
          << serving.value_or("(nothing)") << "; " << read_text(dir + "/worker2.log");
    }
    if (second && !asked && i % 100 == 0) {
      auto w2 = status_of_worker(address, 2, dir + "/status.log");
      if (w2.is_null() || w2["pieces"].get<int64_t>() == 0) continue;
      int status = 0;
      const std::string said = run_output({kDataecho, "service", "stop-worker", address, "w1"},
                                          dir + "/stop.log", &status);
      ASSERT_EQ(status, 0) << read_text(dir + "/stop.log");
      EXPECT_NE(said.find("worker w1 (127.0.0.1:"), std::string::npos) << said;
      asked = true;
    }
  }
  EXPECT_EQ(pipe.terminate(), 0) << read_text(dir + "/pipe.log");
  ASSERT_TRUE(asked) << "worker w2 got no piece; " << read_text(dir + "/pipe.log");
  EXPECT_EQ(workers[0]->wait_exit(), 0) << read_text(dir + "/worker1.log");
  EXPECT_NE(read_text(dir + "/worker1.log").find("left"), std::string::npos)
      << read_text(dir + "/worker1.log");
  ASSERT_TRUE(each_id_once(ids_of_lines(out), kCount)) << read_text(dir + "/pipe.log");

  auto w1 = status_of_worker(address, 1, dir + "/status.log");
  EXPECT_EQ(w1["state"], "left") << w1.dump();
  auto w2 = status_of_worker(address, 2, dir + "/status.log");
  EXPECT_GT(w2["elements"].get<int64_t>() + w2["pieces"].get<int64_t>(), 0) << w2.dump();
  EXPECT_EQ(second->terminate(), 0) << read_text(dir + "/worker2.log");
  EXPECT_EQ(status_of_worker(address, 2, dir + "/status.log")["state"], "left");
}

// TLS: a CA and a server certificate for 127.0.0.1 and localhost made with `openssl`
// (EC P-256, in the test's folder), and another CA. The dispatcher and the workers serve
// TLS with the certificate; clients trust the CA by ca_file or --ca-file.
class ServiceTls : public ServiceProcesses {
 protected:
  void SetUp() override {
    ServiceProcesses::SetUp();
    if (IsSkipped()) return;
    if (std::system("openssl version > /dev/null 2>&1") != 0)
      GTEST_SKIP() << "no openssl to make the test's certificates";
    make_certificates();
    start_dispatcher(
        {"--port", "0", "--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"});
  }
  std::vector<std::string> server_tls() const {
    return {"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"};
  }
  // `dataecho service status` with these arguments: its exit status, output and errors.
  int status_of(const std::vector<std::string>& args, std::string& out) {
    std::vector<std::string> argv = {kDataecho, "service", "status"};
    argv.insert(argv.end(), args.begin(), args.end());
    int status = 0;
    out = run_output(argv, dir + "/status.log", &status);
    out += read_text(dir + "/status.log");
    return status;
  }

 private:
  void make_certificates() {
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    const std::string d = dir + "/";
    write_file(d + "ext.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    const std::string cmd =
        "(cd " + d + " && openssl req -x509 -days 2" + ec +
        " -keyout ca.key -out ca.pem -subj /CN=ca" + " && openssl req -x509 -days 2" + ec +
        " -keyout other.key -out other.pem -subj /CN=other" + " && openssl req" + ec +
        " -keyout server.key -out server.csr -subj /CN=localhost" +
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial" +
        " -days 2 -extfile ext.cnf -out server.pem)";
    ASSERT_EQ(std::system((cmd + " > " + d + "openssl.log 2>&1").c_str()), 0)
        << read_text(d + "openssl.log");
  }
};

// A dynamic epoch over TLS: the dispatcher, a worker (serving TLS, trusting the CA for
// the dispatcher) and a `dataecho pipe` whose spec gives ca_file; each id once. Then the
// status over TLS lists the worker.
TEST_F(ServiceTls, AnEpochOverTlsGivesEachIdOnce) {
  std::vector<std::string> args = server_tls();
  args.insert(args.end(), {"--ca-file", dir + "/ca.pem"});
  auto workers = start_workers(1, args);
  if (HasFailure()) return;
  write_images(dir + "/images.idx", 2000);
  write_spec({{"sharding", "dynamic"}, {"lanes", 4}, {"ca_file", dir + "/ca.pem"}});
  int status = 0;
  const std::string out =
      run_output({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log", &status);
  EXPECT_EQ(status, 0) << read_text(dir + "/pipe.log");
  ASSERT_TRUE(each_id_once(ids_of_lines(out), 2000)) << read_text(dir + "/pipe.log");

  std::string text;
  ASSERT_EQ(status_of({address, "--json", "--ca-path", dir}, text), 0) << text;
  const auto s = nlohmann::json::parse(text.substr(0, text.rfind('}') + 1));
  EXPECT_EQ(s["jobs"].size(), 1u) << text;
  EXPECT_EQ(s["workers"].size(), 1u) << text;
}

// A plaintext client of a TLS server, a TLS client trusting another CA, and a TLS client
// of a plaintext server each fail naming the address and what to check, within their
// timeout.
TEST_F(ServiceTls, PlaintextOrAnotherCaFailsNamingTheAddress) {
  Child plain({kDataecho, "dispatcher", "--bind", "127.0.0.1", "--port", "0"}, dir + "/plain.log");
  const std::string plain_address = dispatcher_address(plain, dir + "/plain.log");
  const auto start = std::chrono::steady_clock::now();
  std::string text;
  EXPECT_NE(status_of({address, "--timeout", "5"}, text), 0);
  EXPECT_NE(text.find("at " + address), std::string::npos) << text;
  EXPECT_NE(text.find("if the server serves TLS, give its CA"), std::string::npos) << text;
  EXPECT_NE(status_of({address, "--timeout", "5", "--ca-file", dir + "/other.pem"}, text), 0);
  EXPECT_NE(text.find("at " + address), std::string::npos) << text;
  EXPECT_NE(text.find("TLS failed"), std::string::npos) << text;
  EXPECT_NE(status_of({plain_address, "--timeout", "5", "--ca-file", dir + "/ca.pem"}, text), 0);
  EXPECT_NE(text.find("at " + plain_address), std::string::npos) << text;
  EXPECT_NE(text.find("TLS failed"), std::string::npos) << text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));

  // A trainer without the CA: its source fails within its connect timeout.
  write_images(dir + "/images.idx", 10);
  write_spec({{"connect_timeout_s", 2}});
  int status = 0;
  const auto pipe_start = std::chrono::steady_clock::now();
  run_output({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log", &status);
  EXPECT_NE(status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - pipe_start, std::chrono::seconds(10));
  const std::string log = read_text(dir + "/pipe.log");
  EXPECT_NE(log.find(address), std::string::npos) << log;
  EXPECT_NE(log.find("if the server serves TLS"), std::string::npos) << log;
}

// A certificate without its key is refused naming the flag; so is a file that is no PEM.
TEST_F(ServiceTls, ACertificateWithoutItsKeyIsRefused) {
  int status = 0;
  run_output({kDataecho, "dispatcher", "--port", "0", "--tls-cert", dir + "/server.pem"},
             dir + "/d.log", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(read_text(dir + "/d.log").find("--tls-key is missing"), std::string::npos)
      << read_text(dir + "/d.log");
  run_output({kDataecho, "worker", "--dispatcher", address, "--tls-key", dir + "/server.key"},
             dir + "/w.log", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(read_text(dir + "/w.log").find("--tls-cert is missing"), std::string::npos)
      << read_text(dir + "/w.log");
  run_output({kDataecho, "dispatcher", "--port", "0", "--tls-cert", dir + "/ext.cnf", "--tls-key",
              dir + "/server.key"},
             dir + "/d.log", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(read_text(dir + "/d.log").find(dir + "/ext.cnf holds no PEM CERTIFICATE"),
            std::string::npos)
      << read_text(dir + "/d.log");
}

// `dataecho service status --json` of the dispatcher at `address` (`args` added) until
// `done` holds of it, for up to about 40 s; the last one read.
nlohmann::json status_until(const std::string& address, const std::vector<std::string>& args,
                            const std::string& log,
                            const std::function<bool(const nlohmann::json&)>& done) {
  nlohmann::json s;
  for (int tries = 0; tries < 120; ++tries) {
    std::vector<std::string> argv = {kDataecho, "service", "status", address, "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    int status = 0;
    s = nlohmann::json::parse(run_output(argv, log, &status), nullptr, false);
    if (!s.is_discarded() && done(s)) return s;
    usleep(250'000);
  }
  return s;
}

// How many of the status's launches are in `state` (with exit status `exit`, when given).
size_t launches_in(const nlohmann::json& s, const std::string& state, int exit = -1) {
  size_t n = 0;
  if (s.is_discarded() || !s.contains("launch")) return 0;
  for (const auto& l : s["launch"]["launched"])
    if (l["state"] == state && (exit < 0 || l.value("exit_status", -1) == exit)) ++n;
  return n;
}

// `dataecho service scale ADDRESS N` (`args` added): its exit status; its output and errors
// in `said`.
int scale(const std::string& address, int n, const std::vector<std::string>& args,
          const std::string& dir, std::string& said) {
  std::vector<std::string> argv = {kDataecho, "service", "scale", address, std::to_string(n)};
  argv.insert(argv.end(), args.begin(), args.end());
  int status = 0;
  said = run_output(argv, dir + "/scale.log", &status);
  said += read_text(dir + "/scale.log");
  return status;
}

// The default launcher: `service scale` to 2 starts two local `dataecho worker` processes
// (the dispatcher's binary; the token in their environment, never on their command
// line), which serve a dynamic epoch: each id once. Scaled to 1 mid-epoch, the newest
// launched worker leaves (its piece finished) and exits with status 0; the other runs on.
TEST_F(ServiceProcesses, ScaleLaunchesLocalWorkersAndAsksTheNewestToLeave) {
  const std::string token = "launch-token-7f3a";
  write_file(dir + "/token", token + "\n");
  start_dispatcher({"--port", "0", "--token-file", dir + "/token", "--max-workers", "4"});
  const std::vector<std::string> with_token = {"--token-file", dir + "/token"};
  std::string said;
  ASSERT_EQ(scale(address, 2, with_token, dir, said), 0) << said;
  EXPECT_NE(said.find("target 2 worker(s)"), std::string::npos) << said;
  auto s = status_until(address, with_token, dir + "/status.log", [](const nlohmann::json& j) {
    return launches_in(j, "running") == 2 && j["workers"].size() == 2;
  });
  ASSERT_EQ(launches_in(s, "running"), 2u) << s.dump() << read_text(dir + "/dispatcher.log");
  for (const auto& l : s["launch"]["launched"]) {
    const std::string proc = "/proc/" + std::to_string(l["pid"].get<int64_t>());
    const std::string cmdline = read_text(proc + "/cmdline");
    EXPECT_NE(cmdline.find("worker"), std::string::npos) << cmdline;
    EXPECT_EQ(cmdline.find(token), std::string::npos) << cmdline;
    EXPECT_EQ(l["command"].get<std::string>().find(token), std::string::npos) << l.dump();
    EXPECT_NE(read_text(proc + "/environ").find("DATAECHO_SERVICE_TOKEN=" + token),
              std::string::npos);
  }

  constexpr uint32_t kCount = 2000;
  write_images(dir + "/images.idx", kCount);
  write_spec({{"sharding", "dynamic"},
              {"lanes", 6},
              {"buffer_mb", 1},
              {"token_file", dir + "/token"},
              {"stages", {{{"op", "map"}, {"fn", "sleep"}, {"args", {{"ms", 1}}}}}}});
  Child pipe({kDataecho, "pipe", dir + "/spec.json"}, dir + "/pipe.log");
  std::string out;
  for (int i = 0;; ++i) {
    const auto l = pipe.line(60);
    if (!l) break;
    out += *l + "\n";
    if (i == 500) {
      ASSERT_EQ(scale(address, 1, with_token, dir, said), 0) << said;
    }
  }
  EXPECT_EQ(pipe.terminate(), 0) << read_text(dir + "/pipe.log");
  ASSERT_TRUE(each_id_once(ids_of_lines(out), kCount)) << read_text(dir + "/pipe.log");

  s = status_until(address, with_token, dir + "/status.log",
                   [](const nlohmann::json& j) { return launches_in(j, "exited", 0) == 1; });
  ASSERT_EQ(s["launch"]["launched"].size(), 2u) << s.dump();
  EXPECT_EQ(s["launch"]["launched"][1]["state"], "exited") << s.dump();
  EXPECT_EQ(s["launch"]["launched"][1]["exit_status"], 0) << s.dump();
  EXPECT_EQ(s["launch"]["launched"][0]["state"], "running") << s.dump();
  EXPECT_EQ(s["launch"]["target"], 1) << s.dump();
  const int64_t left = s["launch"]["launched"][1]["worker"];
  for (const auto& w : s["workers"])
    if (w["worker"] == left) {
      EXPECT_EQ(w["state"], "left") << s.dump();
    }
  EXPECT_EQ(dispatcher().terminate(), 0) << read_text(dir + "/dispatcher.log");
}

// A --launch template, run by /bin/sh -c with its fields put in (the hosts round robin):
// scaled to 2 it starts two workers, which register; scaled to 0 both leave with status
// 0. A template that fails is reported with its exit status and its standard error's
// last line, and tried again only --launch-retries times; a target over --max-workers is
// refused.
TEST_F(ServiceProcesses, ATemplateLaunchesWorkersAndAFailingOneIsReported) {
  const std::string marker = dir + "/marker";
  start_dispatcher({"--port", "0", "--hosts", "a,b", "--launch",
                    "echo {index} {host} >> " + marker +
                        "; exec {exe} worker --dispatcher {dispatcher} --bind 127.0.0.1"});
  std::string said;
  ASSERT_EQ(scale(address, 2, {}, dir, said), 0) << said;
  auto s = status_until(address, {}, dir + "/status.log",
                        [](const nlohmann::json& j) { return launches_in(j, "running") == 2; });
  ASSERT_EQ(launches_in(s, "running"), 2u) << s.dump() << read_text(dir + "/dispatcher.log");
  std::string lines = read_text(marker);
  EXPECT_TRUE(lines == "1 a\n2 b\n" || lines == "2 b\n1 a\n") << lines;
  EXPECT_NE(s["launch"]["launched"][0]["command"].get<std::string>().find("--dispatcher '" +
                                                                          address + "'"),
            std::string::npos)
      << s.dump();
  ASSERT_EQ(scale(address, 0, {}, dir, said), 0) << said;
  s = status_until(address, {}, dir + "/status.log",
                   [](const nlohmann::json& j) { return launches_in(j, "exited", 0) == 2; });
  EXPECT_EQ(launches_in(s, "exited", 0), 2u) << s.dump() << read_text(dir + "/dispatcher.log");
  EXPECT_EQ(scale(address, 17, {}, dir, said), 1) << said;
  EXPECT_NE(said.find("at most 16 workers (the dispatcher's --max-workers)"), std::string::npos)
      << said;

  // A failing template, retried once.
  start_dispatcher({"--port", "0", "--launch-retries", "1", "--launch",
                    "echo starting >&2; echo cannot reach {host} >&2; exit 3"});
  ASSERT_EQ(scale(address, 1, {}, dir, said), 0) << said;
  s = status_until(address, {}, dir + "/status.log",
                   [](const nlohmann::json& j) { return launches_in(j, "failed", 3) == 2; });
  usleep(500'000);  // time for a third launch that must not come
  s = status_until(address, {}, dir + "/status.log",
                   [](const nlohmann::json& j) { return launches_in(j, "failed", 3) >= 2; });
  ASSERT_EQ(s["launch"]["launched"].size(), 2u) << s.dump();
  for (const auto& l : s["launch"]["launched"]) {
    EXPECT_EQ(l["last_line"], "cannot reach localhost") << l.dump();
    EXPECT_NE(l["why"].get<std::string>().find("exited with status 3 before its worker registered"),
              std::string::npos)
        << l.dump();
  }
  EXPECT_NE(s["launch"]["note"].get<std::string>().find("launching stopped after 2 failed"),
            std::string::npos)
      << s.dump();
  int status = 0;
  const std::string text =
      run_output({kDataecho, "service", "status", address}, dir + "/status.log", &status);
  EXPECT_NE(text.find("failed, exit status 3: exited with status 3"), std::string::npos) << text;
}

}  // namespace
}  // namespace dataecho::service
