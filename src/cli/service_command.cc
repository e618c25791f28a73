// The data service's processes (docs/service.md):
//   dataecho dispatcher --port P [--bind A] [--journal DIR] [--token-file F]
//                       [--tls-cert F --tls-key F] [--launch TEMPLATE] [--hosts H1,H2]
//                       [--max-workers N] [--launch-retries N] [--launch-timeout S]
//                       [--advertise HOST[:PORT]] [--ca-file F]
//   dataecho worker --dispatcher HOST:P [--threads N] [--port 0] [--token-file F]
//                   [--tls-cert F --tls-key F] [--ca-file F | --ca-path DIR]
//   dataecho service status HOST:P [--json] [--ca-file F | --ca-path DIR]
//   dataecho service stop-job HOST:P NAME [--ca-file F | --ca-path DIR]
//   dataecho service stop-worker HOST:P WORKER [--ca-file F | --ca-path DIR]
//   dataecho service scale HOST:P N [--ca-file F | --ca-path DIR]
// The dispatcher prints "listening on A:PORT" and the worker "worker wN serving on
// HOST:PORT" on standard output once they serve (tests read the port there). The
// dispatcher stops cleanly on SIGTERM or SIGINT; the worker leaves: on SIGTERM or SIGINT,
// or told to by `service stop-worker`, it finishes the pieces it holds and exits (status
// 0) once its streams have ended, or at a second signal. The token is read from --token-file or
// DATAECHO_SERVICE_TOKEN, never from an argument, and never printed.
#include <signal.h>

#include <iostream>

#include "commands.h"
#include "dataecho/service/service.h"
#include "dataecho/spec/service.h"

namespace dataecho::cli {
namespace {

// SIGTERM, SIGINT and SIGHUP blocked in this thread, and so in every thread started after
// it, so that wait_for_stop() receives them.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void wait_for_stop(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
}

// Waits for a signal or the dispatcher's order to leave, then lets the worker drain: it
// returns once the worker's streams have ended, or at a second signal.
void run_until_left(service::Worker& worker, const sigset_t& set) {
  const timespec tick{0, 200'000'000};
  bool signalled = false, said = false;
  for (;;) {
    if (sigtimedwait(&set, nullptr, &tick) > 0) {
      if (signalled) {
        std::cerr << "worker w" << worker.number() << ": a second signal: stopping now\n";
        return;
      }
      signalled = true;
      worker.drain();
    }
    if (worker.draining() && !said) {
      std::cerr << "worker w" << worker.number()
                << ": leaving once its streams end (their pieces held finished; a second "
                   "signal stops it now)\n";
      said = true;
    }
    if (worker.draining() && worker.open_streams() == 0) return;
  }
}

// --tls-cert and --tls-key: a server's certificate and key (both or neither).
struct ServerTlsArgs {
  std::string cert_file, key_file;
};

void add_server_tls_args(CLI::App* cmd, ServerTlsArgs& args) {
  cmd->add_option("--tls-cert", args.cert_file,
                  "PEM certificate (chain) to serve TLS with, with --tls-key (default: plaintext)");
  cmd->add_option("--tls-key", args.key_file, "PEM private key of --tls-cert");
}

// --ca-file, --ca-path and --tls-server-name: a client's TLS.
struct ClientTlsArgs {
  std::string ca_file, ca_path, server_name;
  service::TlsOptions read() const {
    service::TlsOptions tls;
    tls.root_pem = service::read_ca_roots(ca_file, ca_path, "--ca-file", "--ca-path");
    tls.server_name = server_name;
    return tls;
  }
};

void add_client_tls_args(CLI::App* cmd, ClientTlsArgs& args, const std::string& whom) {
  cmd->add_option("--ca-file", args.ca_file,
                  "PEM certificates of the CA(s) that signed " + whom +
                      "'s TLS certificates: calls use TLS (default: plaintext)");
  cmd->add_option("--ca-path", args.ca_path, "a folder of such PEM files (*.pem, *.crt), joined");
  cmd->add_option("--tls-server-name", args.server_name,
                  "the name the certificates must carry (default: the host dialled)");
}

// How the dispatcher launches workers (`dataecho service scale`).
void add_launch_args(CLI::App* cmd, service::LaunchOptions& o) {
  cmd->add_option("--launch", o.launch,
                  "command that starts a worker, run by /bin/sh -c with {dispatcher}, {host}, "
                  "{index} and {exe} put in (default: a local `dataecho worker` process)");
  cmd->add_option("--hosts", o.hosts,
                  "hosts for {host}: the one with the fewest launched workers running, "
                  "round robin among equals (default: localhost)")
      ->delimiter(',');
  cmd->add_option("--max-workers", o.max_workers,
                  "the most workers `service scale` may ask for (default 16)");
  cmd->add_option("--launch-retries", o.retries,
                  "failed launches tried again before launching stops until the next "
                  "`service scale` (default 2)");
  cmd->add_option("--launch-timeout", o.register_timeout_s,
                  "seconds a launched worker has to register (default 60)");
  cmd->add_option("--advertise", o.advertise,
                  "HOST[:PORT] launched workers reach the dispatcher at (default: --bind, or "
                  "this host's name; 127.0.0.1 for local workers)");
  cmd->add_option("--ca-file", o.ca_file,
                  "PEM CA file that local launched workers check this dispatcher's certificate "
                  "with (with --tls-cert)");
}

void add_dispatcher_command(CLI::App& app) {
  struct Args {
    service::DispatcherOptions o;
    std::string token_file;
    ServerTlsArgs tls;
    double worker_timeout_s = 10;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "dispatcher", "run the data service's dispatcher: its jobs and workers (docs/service.md)");
  cmd->add_option("--port", args->o.port, "port to listen on (0: any free port; default 0)");
  cmd->add_option("--bind", args->o.bind, "address to listen on (default 0.0.0.0)");
  cmd->add_option("--journal", args->o.journal_dir,
                  "folder of the state's journal, replayed at start (default: memory only)");
  cmd->add_option("--token-file", args->token_file,
                  "file whose first line is the token calls must carry "
                  "(default: $DATAECHO_SERVICE_TOKEN, or none)");
  cmd->add_option("--worker-timeout", args->worker_timeout_s,
                  "seconds without a beat after which a worker is not given new jobs (default 10)");
  add_server_tls_args(cmd, args->tls);
  add_launch_args(cmd, args->o.launch);
  cmd->callback([args] {
    const sigset_t signals = block_stop_signals();
    args->o.token = service::read_token(args->token_file, "--token-file");
    args->o.tls = service::read_server_tls(args->tls.cert_file, args->tls.key_file);
    args->o.launch.tls_cert_file = args->tls.cert_file;
    args->o.launch.tls_key_file = args->tls.key_file;
    args->o.worker_timeout_ms = static_cast<int64_t>(args->worker_timeout_s * 1000);
    auto dispatcher = start_service_dispatcher(args->o);
    for (const std::string& w : dispatcher->journal_warnings())
      std::cerr << "warning: " << w << "\n";
    if (args->o.journal_dir.empty())
      std::cerr << "no --journal: the dispatcher's state is kept in memory only\n";
    std::cout << "listening on " << args->o.bind << ":" << dispatcher->port() << std::endl;
    wait_for_stop(signals);
    dispatcher->stop();
    std::cerr << "stopped" << std::endl;
  });
}

void add_worker_command(CLI::App& app) {
  struct Args {
    service::WorkerOptions o;
    std::string token_file;
    ServerTlsArgs server_tls;
    ClientTlsArgs client_tls;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "run a data service worker: it runs jobs' upstream pipelines (docs/service.md)");
  cmd->add_option("--dispatcher", args->o.dispatcher, "the dispatcher's HOST:PORT")->required();
  cmd->add_option("--threads", args->o.threads,
                  "CPU budget of its pipelines, in cores (default 0: the pipelines' own)");
  cmd->add_option("--port", args->o.port, "port of its Read server (0: any free port; default 0)");
  cmd->add_option("--bind", args->o.bind, "address to listen on (default 0.0.0.0)");
  cmd->add_option("--advertise", args->o.advertise,
                  "HOST[:PORT] consumers reach it at (default: its address on the route to the "
                  "dispatcher)");
  cmd->add_option("--token-file", args->token_file,
                  "file whose first line is the service's token "
                  "(default: $DATAECHO_SERVICE_TOKEN, or none)");
  cmd->add_option("--connect-timeout", args->o.connect_timeout_s,
                  "seconds to wait for the dispatcher at start (default 30)");
  cmd->add_option("--launch-index", args->o.launch_index,
                  "the dispatcher's launch this worker is (default: $DATAECHO_LAUNCH_INDEX, "
                  "which the dispatcher sets; 0: not launched by it)")
      ->envname("DATAECHO_LAUNCH_INDEX");
  add_server_tls_args(cmd, args->server_tls);
  add_client_tls_args(cmd, args->client_tls, "the dispatcher");
  cmd->callback([args] {
    const sigset_t signals = block_stop_signals();
    args->o.token = service::read_token(args->token_file, "--token-file");
    args->o.tls = service::read_server_tls(args->server_tls.cert_file, args->server_tls.key_file);
    const service::TlsOptions client = args->client_tls.read();
    args->o.tls.root_pem = client.root_pem;
    args->o.tls.server_name = client.server_name;
    auto worker = start_service_worker(args->o);
    std::cout << "worker w" << worker->number() << " serving on " << worker->address() << std::endl;
    run_until_left(*worker, signals);
    worker->stop();
    std::cerr << (worker->draining() ? "left" : "stopped") << std::endl;
  });
}

// `dataecho service status|stop-job`: what every such command takes.
struct ServiceArgs {
  std::string dispatcher;
  std::string token_file;
  double timeout_s = 10;
  ClientTlsArgs tls;
};

void add_service_args(CLI::App* cmd, ServiceArgs& args) {
  cmd->add_option("dispatcher", args.dispatcher, "the dispatcher's HOST:PORT")->required();
  cmd->add_option("--token-file", args.token_file,
                  "file whose first line is the service's token "
                  "(default: $DATAECHO_SERVICE_TOKEN, or none)");
  cmd->add_option("--timeout", args.timeout_s, "seconds to wait for the answer (default 10)");
  add_client_tls_args(cmd, args.tls, "the dispatcher");
}

void add_stop_job_command(CLI::App* service) {
  struct Args : ServiceArgs {
    std::string job;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = service->add_subcommand(
      "stop-job", "stop a job: its name is free again, and workers are no longer given it");
  add_service_args(cmd, *args);
  cmd->add_option("job", args->job, "the job's name")->required();
  cmd->callback([args] {
    const int64_t id = service::stop_job(args->dispatcher, args->job,
                                         service::read_token(args->token_file, "--token-file"),
                                         args->timeout_s, nullptr, args->tls.read());
    std::cout << "stopped job " << id << " '" << args->job << "'\n";
  });
}

void add_stop_worker_command(CLI::App* service) {
  struct Args : ServiceArgs {
    std::string worker;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = service->add_subcommand(
      "stop-worker",
      "ask a worker to leave: it finishes the pieces it holds, takes no new ones, and exits");
  add_service_args(cmd, *args);
  cmd->add_option("worker", args->worker, "the worker: w3, 3, or its HOST:PORT")->required();
  cmd->callback([args] {
    const auto w = service::stop_worker(args->dispatcher, args->worker,
                                        service::read_token(args->token_file, "--token-file"),
                                        args->timeout_s, nullptr, args->tls.read());
    std::cout << "worker w" << w.worker << " (" << w.address
              << ") asked to leave: it finishes the pieces it holds, then exits\n";
  });
}

void add_scale_command(CLI::App* service) {
  struct Args : ServiceArgs {
    int64_t workers = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = service->add_subcommand(
      "scale",
      "set how many workers serve: the dispatcher launches workers up to N and asks the newest "
      "it launched to leave above it (docs/service.md, Launching workers)");
  add_service_args(cmd, *args);
  cmd->add_option("workers", args->workers, "the number of workers")->required();
  cmd->callback([args] {
    const auto s = service::set_workers(args->dispatcher, args->workers,
                                        service::read_token(args->token_file, "--token-file"),
                                        args->timeout_s, nullptr, args->tls.read());
    std::cout << "target " << s.target << " worker(s); " << s.counted
              << " counted now (`dataecho service status` shows the launches)\n";
  });
}

void add_status_command(CLI::App& app) {
  struct Args : ServiceArgs {
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* service = app.add_subcommand("service", "ask the data service (docs/service.md)");
  service->require_subcommand(1);
  CLI::App* cmd = service->add_subcommand("status", "the dispatcher's jobs and workers");
  add_service_args(cmd, *args);
  cmd->add_flag("--json", args->json, "print JSON");
  add_stop_job_command(service);
  add_stop_worker_command(service);
  add_scale_command(service);
  cmd->callback([args] {
    const auto status = service::service_status(
        args->dispatcher, service::read_token(args->token_file, "--token-file"), args->timeout_s,
        nullptr, args->tls.read());
    if (args->json)
      std::cout << status.dump(2) << "\n";
    else
      std::cout << service::status_text(status);
  });
}

}  // namespace

void add_service_commands(CLI::App& app) {
  add_dispatcher_command(app);
  add_worker_command(app);
  add_status_command(app);
}

}  // namespace dataecho::cli
