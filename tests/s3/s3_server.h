// The S3 server of the tests and the proxy that answers S3's errors on demand.
//
// S3Server runs tests/s3/server/start.js under Node.js: @20minutes/s3rver 4.0.4 (pinned by
// tests/s3/server/package-lock.json, installed by scripts/bootstrap.sh), which verifies
// SigV4 signatures against one key pair (a wrong secret gets SignatureDoesNotMatch, another
// key id InvalidAccessKeyId), lists with ListObjectsV2, answers ranged GETs and keeps its
// buckets as folders of a directory, so that a restart on the same folder serves the same
// objects. It also serves requests without an Authorization header (as anonymous), and it
// checks no region: any region signs. Node.js runs with --openssl-legacy-provider: the
// server makes its listings' continuation tokens with DES, which OpenSSL 3 keeps there. Objects are
// written by an independent client, boto3 (tests/s3/fixtures.py), never by dataecho.
//
// S3FaultProxy runs tests/s3/fault_proxy.py in front of a server: it relays every request
// unchanged (signatures still verify), records each one, and answers by script instead:
// 503 SlowDown / ServiceUnavailable, 500 InternalError, 400 RequestTimeout, 403
// AccessDenied, 301 PermanentRedirect with x-amz-bucket-region, 400
// AuthorizationHeaderMalformed with <Region>, or a response cut after K body bytes.
//
//   S3Server server;
//   server.start();                                   // fresh store, free port
//   server.create_bucket("data");                     // boto3
//   server.upload("data", local_folder, "shards/");   // every file, as shards/<relative path>
//   server.endpoint();        // "http://127.0.0.1:PORT", path-style: /data/shards/a.tfrecord
//   server.access_key_id(); server.secret_access_key(); server.region();  // "us-east-1"
//   server.stop(); server.restart();                  // SIGKILL; same port and folder
//
//   S3FaultProxy proxy;
//   proxy.start(server);                              // its own free port
//   proxy.fault({.kind = "slowdown", .path = "/data/shards/a.tfrecord", .times = 3});
//   proxy.endpoint();         // give this endpoint to the client under test
//   proxy.requests();         // every request so far: method, target, headers, answer
//   proxy.clear();            // forget faults and requests
//
// Both throw std::runtime_error when they cannot start, with the reason (their stderr);
// when Node.js, the installed npm packages or boto3 are missing, the message says to run
// scripts/bootstrap.sh. The children are started with PR_SET_PDEATHSIG (they die with the
// test program): call start() / restart() from the test's main thread. Not thread-safe:
// one owner drives each.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dataecho::testing {

struct S3ServerOptions {
  std::string directory;  // the store (a bucket is a folder); empty: a fresh temporary one
  int port = 0;           // 0: a free port, chosen by the server
  std::string access_key_id = "AKIADATAECHOTEST0001";
  std::string secret_access_key = "dataecho/test+secret/s3rver0123456789abcd";
  // The folder of start.js and its node_modules (tests/s3/server); tests of the fixture's
  // own error messages point it elsewhere.
  std::string server_dir;
};

class S3Server {
 public:
  S3Server() = default;
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  // Starts the server and waits for its "listening" line (at most 10 s).
  void start(const S3ServerOptions& options = {});
  // Kills it (SIGKILL: connections in flight are cut, as by a crash) and waits for it.
  void stop();
  // Starts it again on the same port and folder.
  void restart();

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string endpoint() const;  // "http://127.0.0.1:PORT"
  const std::string& directory() const { return options_.directory; }
  const std::string& access_key_id() const { return options_.access_key_id; }
  const std::string& secret_access_key() const { return options_.secret_access_key; }
  static std::string region() { return "us-east-1"; }

  // With boto3 (tests/s3/fixtures.py); throw with its output on failure.
  void create_bucket(const std::string& bucket) const;
  // The file `path` as key `key` (default: its name), or every file under the folder
  // `path` as `key` + its relative path.
  void upload(const std::string& bucket, const std::string& path,
              const std::string& key = "") const;

 private:
  void launch();
  S3ServerOptions options_;
  int port_ = 0;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string log_path_;
};

// What tests/s3/fixtures.py printed and its exit status (0 ok, 3 refused by the server
// with "error CODE STATUS", 4 transfer failed).
struct FixturesRun {
  int status = -1;
  std::string output;
};
// Runs tests/s3/fixtures.py with the endpoint and key pair, then `args` (its command).
FixturesRun run_fixtures(const std::string& endpoint, const std::string& access_key_id,
                         const std::string& secret_access_key,
                         const std::vector<std::string>& args);

// One scripted answer of the proxy (tests/s3/fault_proxy.py documents the kinds).
struct S3Fault {
  // slowdown, unavailable, internal, timeout, denied, redirect, malformed or cut
  std::string kind = "";
  std::string path = "*";            // "/bucket/key", "/bucket/prefix*" or "*" (the target's path)
  std::string query = "";            // text the target's query holds ("prefix=a%2F"); "": any
  int times = 1;                     // the next `times` matching requests; -1: every one
  std::string method = "";           // "GET", "HEAD", ...; empty: any
  std::string region = "eu-west-1";  // redirect and malformed: the bucket's region
  int64_t bytes = 0;                 // cut: the body bytes relayed before the cut
};

struct ProxiedRequest {
  std::string method, target;
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string answer;                                        // "forwarded" or the fault's kind
  // The first header of that name (any case), or "".
  std::string header(const std::string& name) const;
};

class S3FaultProxy {
 public:
  S3FaultProxy() = default;
  ~S3FaultProxy();
  S3FaultProxy(const S3FaultProxy&) = delete;
  S3FaultProxy& operator=(const S3FaultProxy&) = delete;

  // Listens on a free loopback port and relays to 127.0.0.1:`upstream_port`; it keeps
  // working across a restart of the server (same port).
  void start(int upstream_port);
  void start(const S3Server& server) { start(server.port()); }
  void stop();

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string endpoint() const;  // "http://127.0.0.1:PORT"

  void fault(const S3Fault& fault);
  std::vector<ProxiedRequest> requests();
  void clear();

 private:
  std::string command(const std::string& json_line);
  int port_ = 0;
  pid_t pid_ = -1;
  int control_fd_ = -1;
  std::string pending_;
  std::string log_path_;
};

}  // namespace dataecho::testing
