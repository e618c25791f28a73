// nginx configurations for serving a folder of shards on loopback, optionally throttled:
// the emulated slow link of the experiments (`dataecho serve`, scripts/serve.sh) and the
// real server of the HTTP tests. One generator, so that what the tests exercise is what
// the experiments use. Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dataecho {

struct NginxConfigOptions {
  std::string root_dir;                      // the folder served at /
  std::string listen_address = "127.0.0.1";  // loopback only, by default
  int port = 8080;
  // Bandwidth per connection in nginx syntax: "2m" = 2 MiB/s, "500k" = 500 KiB/s,
  // "1048576" = bytes/s. Empty: unlimited.
  std::string limit_rate;
  // Concurrent connections served at once (nginx limit_conn; excess ones get 503, which
  // dataecho retries). 0: unlimited.
  int max_connections = 0;
  // Where nginx writes its pid file, error log and temp folders. Must exist.
  std::string prefix_dir;
  int worker_processes = 1;
  // false: one process, no workers (quick clean stop; what the tests use).
  bool master_process = true;
  bool access_log = false;  // writes prefix_dir/access.log when true
  // HTTPS instead of HTTP when both are given (PEM files; nginx-light has the SSL module).
  std::string ssl_certificate;
  std::string ssl_certificate_key;
  // When not empty, requests without exactly this Authorization header get 401.
  std::string required_authorization;
  // When not empty, GET /moved/PATH answers 302 to redirect_to + "/" + PATH (tests).
  std::string redirect_to;
  // GET /denied/... answers 403, as an object store does for an expired signature (tests).
  bool deny = false;
};

// The text of nginx.conf for these options. Throws dataecho::Error on a bad rate.
std::string nginx_config_text(const NginxConfigOptions& options);

// Writes prefix_dir/nginx.conf and returns its path.
std::string write_nginx_config(const NginxConfigOptions& options);

// The nginx binary: $DATAECHO_NGINX, else /usr/sbin/nginx, else `nginx` on PATH. Throws
// dataecho::Error naming the package (nginx-light) when none is found.
std::string find_nginx();

// argv to run nginx in the foreground with the config written by write_nginx_config.
std::vector<std::string> nginx_command(const NginxConfigOptions& options);

// Bytes per second of an nginx rate ("2m" -> 2097152); 0 for empty. Throws on garbage.
int64_t parse_nginx_rate(const std::string& rate);

// Whether something accepts TCP connections on 127.0.0.1:port (nginx has started).
bool loopback_port_accepts(int port);

// The text of nginx's error log for these options (prefix_dir/error.log; "" if none).
std::string nginx_error_log(const NginxConfigOptions& options);

}  // namespace dataecho
