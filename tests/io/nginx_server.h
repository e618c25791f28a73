// NginxServer: a real nginx serving a folder on a free loopback port, for tests. Uses the
// same config generator as `dataecho serve`. Not thread-safe: one owner drives it.
// The nginx process is started with PR_SET_PDEATHSIG, so it dies with the test program
// even when a test crashes; the destructor stops it (SIGTERM, then wait). PDEATHSIG is
// per thread: call start() / restart() from a thread that outlives the server (the test's
// main thread), never from a short-lived helper thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "dataecho/core/pipeline.h"

#include "dataecho/io/nginx_config.h"

namespace dataecho::testing {

struct NginxServerOptions {
  std::string limit_rate;   // per connection, nginx syntax ("500k"); empty: unlimited
  int max_connections = 0;  // limit_conn; 0: unlimited
  int port = 0;             // 0: a free port
  std::string ssl_certificate, ssl_certificate_key;  // both: HTTPS
  std::string required_authorization;                // else 401
  std::string redirect_to;                           // /moved/PATH answers 302 to redirect_to/PATH
  bool deny = false;                                 // /denied/... answers 403
  bool access_log = false;                           // access_log_path() gets a line per request
};

class NginxServer {
 public:
  NginxServer() = default;
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  // Starts nginx serving `root_dir` and waits until it accepts connections. Throws
  // std::runtime_error with nginx's error log when it does not come up.
  void start(const std::string& root_dir, const NginxServerOptions& options = {});
  // Stops nginx (connections in flight are cut) and waits for it; keeps the port.
  void stop();
  // Starts it again on the same port with the same folder and options.
  void restart();

  bool running() const { return pid_ > 0; }
  int port() const { return config_.port; }
  // "http://127.0.0.1:PORT/" + path ("https://" when the server has a certificate)
  std::string url(const std::string& path) const;
  // nginx's access log (with NginxServerOptions::access_log).
  std::string access_log_path() const { return config_.prefix_dir + "/access.log"; }

 private:
  void launch();
  NginxConfigOptions config_;
  pid_t pid_ = -1;
};

// A free TCP port on 127.0.0.1 (bound and released: another process could take it).
int free_loopback_port();

// Reads `first` elements of `pipeline`, stops `server`, reads on from a thread while it
// is down, restarts it after 2 s, and returns every element read; `error` gets the text
// of an exception the reading ended with ("" if none). The restart tests of plain HTTP
// and HTTPS.
std::vector<Example> read_through_restart(Pipeline& pipeline, NginxServer& server, int first,
                                          std::string& error);

}  // namespace dataecho::testing
