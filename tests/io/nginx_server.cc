#include "nginx_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_util.h"

namespace dataecho::testing {
int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

NginxServer::~NginxServer() { stop(); }

void NginxServer::start(const std::string& root_dir, const NginxServerOptions& options) {
  stop();
  config_ = NginxConfigOptions{};
  config_.root_dir = root_dir;
  config_.limit_rate = options.limit_rate;
  config_.max_connections = options.max_connections;
  config_.ssl_certificate = options.ssl_certificate;
  config_.ssl_certificate_key = options.ssl_certificate_key;
  config_.required_authorization = options.required_authorization;
  config_.redirect_to = options.redirect_to;
  config_.deny = options.deny;
  config_.access_log = options.access_log;
  config_.master_process = false;
  config_.prefix_dir = temp_dir();
  // A port picked by binding could be taken before nginx binds it: try a few.
  for (int attempt = 0;; ++attempt) {
    config_.port = options.port > 0 ? options.port : free_loopback_port();
    try {
      launch();
      return;
    } catch (const std::exception&) {
      if (options.port > 0 || attempt >= 4) throw;
    }
  }
}

void NginxServer::restart() {
  stop();
  launch();
}

void NginxServer::launch() {
  write_nginx_config(config_);
  std::vector<std::string> cmd = nginx_command(config_);
  pid_t pid = testing::spawn_tied(cmd);
  pid_ = pid;
  // Bounded wait: up to 10 s for the port to accept connections.
  for (int i = 0; i < 1000; ++i) {
    if (loopback_port_accepts(config_.port)) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("nginx exited at start on port " + std::to_string(config_.port) +
                               ": " + nginx_error_log(config_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop();
  throw std::runtime_error("nginx did not accept connections on port " +
                           std::to_string(config_.port) + ": " + nginx_error_log(config_));
}

void NginxServer::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  // Bounded: a fast shutdown takes milliseconds; escalate to SIGKILL after 5 s.
  for (int i = 0; i < 500; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string NginxServer::url(const std::string& path) const {
  std::string p = path;
  if (!p.empty() && p[0] == '/') p.erase(0, 1);
  const bool tls = !config_.ssl_certificate.empty();
  return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(config_.port) +
         "/" + p;
}

std::vector<Example> read_through_restart(Pipeline& pipeline, NginxServer& server, int first,
                                          std::string& error) {
  return read_through_outage(
      pipeline, first, [&] { server.stop(); }, [&] { server.restart(); }, error);
}

}  // namespace dataecho::testing
