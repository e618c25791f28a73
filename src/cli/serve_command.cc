// `dataecho serve DIR`: serves a folder of shards with nginx on loopback, optionally
// throttled per connection: the emulated slow link of the experiments and the demo.
// The config comes from dataecho/io/nginx_config.h, the same generator the tests use.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "commands.h"
#include "dataecho/core/error.h"
#include "dataecho/io/nginx_config.h"

namespace dataecho::cli {
namespace {

// Runs nginx until it exits or SIGINT/SIGTERM arrives; returns nginx's exit status.
int run_nginx(const NginxConfigOptions& config, const std::string& rate_text) {
  std::vector<std::string> cmd = nginx_command(config);
  std::vector<char*> argv;
  for (auto& s : cmd) argv.push_back(s.data());
  argv.push_back(nullptr);

  sigset_t stop_signals, old;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop_signals, &old);
  pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, "serve", "fork failed");
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    setpgid(0, 0);  // Ctrl-C reaches us; we stop nginx ourselves
    execv(argv[0], argv.data());
    _exit(127);
  }

  int status = 0;
  bool announced = false;
  auto start = std::chrono::steady_clock::now();
  while (true) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      sigprocmask(SIG_SETMASK, &old, nullptr);
      if (!announced) {
        throw Error(ErrorCode::kIo, "serve", "nginx exited at start: " + nginx_error_log(config),
                    "127.0.0.1:" + std::to_string(config.port));
      }
      return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (!announced && loopback_port_accepts(config.port)) {
      announced = true;
      std::cout << "http://127.0.0.1:" << config.port << "/" << std::endl;
      std::cerr << "serving " << config.root_dir << " on 127.0.0.1:" << config.port << " ("
                << (rate_text.empty() ? "unlimited" : rate_text + "/s") << " per connection, "
                << (config.max_connections > 0 ? std::to_string(config.max_connections)
                                               : std::string("unlimited"))
                << " connections); Ctrl-C to stop" << std::endl;
    }
    if (!announced && std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      sigprocmask(SIG_SETMASK, &old, nullptr);
      throw Error(ErrorCode::kIo, "serve",
                  "nginx did not accept connections within 10 s: " + nginx_error_log(config));
    }
    timespec wait{0, announced ? 200000000L : 20000000L};
    int sig = sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig > 0) {
      kill(pid, SIGTERM);  // nginx: fast shutdown
      waitpid(pid, &status, 0);
      sigprocmask(SIG_SETMASK, &old, nullptr);
      std::cerr << "stopped" << std::endl;
      return 0;
    }
  }
}

}  // namespace

void add_serve_command(CLI::App& app) {
  struct Args {
    std::string dir;
    int port = 8080;
    std::string rate;
    int connections = 0;
    int workers = 1;
    bool print_config = false;
    bool access_log = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "serve a folder over HTTP with nginx on 127.0.0.1, throttled per connection");
  cmd->add_option("dir", args->dir, "folder to serve")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--port", args->port, "port on 127.0.0.1 (default 8080)");
  cmd->add_option("--rate", args->rate,
                  "bandwidth per connection, nginx syntax: 500k, 2m (MiB/s), or bytes/s; "
                  "default unlimited");
  cmd->add_option("--connections", args->connections,
                  "connections served at once; more get 503 (retried by dataecho); "
                  "default unlimited");
  cmd->add_option("--workers", args->workers, "nginx worker processes (default 1)");
  cmd->add_flag("--access-log", args->access_log, "log requests to access.log in the temp folder");
  cmd->add_flag("--print-config", args->print_config, "print the nginx config and exit");
  cmd->callback([args] {
    NginxConfigOptions config;
    config.root_dir = std::filesystem::absolute(args->dir).lexically_normal().string();
    config.port = args->port;
    config.limit_rate = args->rate;
    config.max_connections = args->connections;
    config.worker_processes = std::max(1, args->workers);
    config.access_log = args->access_log;
    parse_nginx_rate(args->rate);  // refuse a bad rate before anything runs
    if (args->print_config) {
      config.prefix_dir = "/tmp/dataecho-serve-PREFIX";
      std::cout << nginx_config_text(config);
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "dataecho-serve-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw Error(ErrorCode::kIo, "serve", "cannot make a temp folder");
    config.prefix_dir = tmpl;
    int rc = 0;
    try {
      write_nginx_config(config);
      rc = run_nginx(config, args->rate);
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(config.prefix_dir, ec);
      throw;
    }
    std::error_code ec;
    std::filesystem::remove_all(config.prefix_dir, ec);
    if (rc != 0)
      throw Error(ErrorCode::kIo, "serve", "nginx exited with status " + std::to_string(rc));
  });
}

}  // namespace dataecho::cli
