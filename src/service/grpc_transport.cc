// The gRPC transport: the plugin libdataecho_grpc.so (grpc_plugin.h), loaded with dlopen
// on first use, behind transport.h's interface. RTLD_LOCAL: gRPC's and abseil's symbols
// stay inside the plugin's own lookup scope. The plugin is never unloaded (gRPC keeps
// threads of its own).
#include <dlfcn.h>

#include <mutex>
#include <utility>

#include "dataecho/core/module_dir.h"
#include "service/grpc_plugin.h"
#include "service/transport.h"

namespace dataecho::service {
namespace {

// The plugin's functions, each named dataecho_grpc_<name>.
#define DATAECHO_GRPC_FUNCTIONS(X)                                                       \
  X(abi_version)                                                                         \
  X(library_version)                                                                     \
  X(slice_unref)                                                                         \
  X(channel_open)                                                                        \
  X(channel_free)                                                                        \
  X(unary) X(stream_open) X(stream_next) X(stream_cancel) X(stream_free) X(server_start) \
      X(call_write) X(call_cancelled) X(call_finish) X(server_stop)

struct Plugin {
#define DATAECHO_GRPC_MEMBER(name) decltype(&dataecho_grpc_##name) name = nullptr;
  DATAECHO_GRPC_FUNCTIONS(DATAECHO_GRPC_MEMBER)
#undef DATAECHO_GRPC_MEMBER
};

// The plugin's functions from `lib`, or the name of the first one missing.
std::string resolve(void* lib, Plugin& p) {
#define DATAECHO_GRPC_RESOLVE(name)                                                \
  p.name = reinterpret_cast<decltype(p.name)>(dlsym(lib, "dataecho_grpc_" #name)); \
  if (p.name == nullptr) return "dataecho_grpc_" #name;
  DATAECHO_GRPC_FUNCTIONS(DATAECHO_GRPC_RESOLVE)
#undef DATAECHO_GRPC_RESOLVE
  return "";
}

// `o`'s settings; the strings stay `o`'s.
dataecho_grpc_options c_options(const TransportOptions& o) {
  return {o.keepalive_ms,        o.keepalive_timeout_ms,   o.min_ping_interval_ms,
          o.max_message_bytes,   o.tls_root_pem.c_str(),   o.tls_cert_pem.c_str(),
          o.tls_key_pem.c_str(), o.tls_server_name.c_str()};
}

// A connection that failed other than by a refused connect (no server there): on a TLS
// channel its handshake (a plaintext server, another CA, a certificate that does not
// name the address), on a plaintext one maybe a server that speaks TLS.
std::string with_tls_hint(const dataecho_grpc_status& s, bool tls) {
  std::string message = s.message;
  const auto has = [&](const char* part) { return message.find(part) != std::string::npos; };
  const bool connecting = has("failed to connect") || has("andshake") || has("SSL") || has("ssl");
  if (s.code != DATAECHO_GRPC_UNAVAILABLE || !connecting || has("onnection refused"))
    return message;
  if (tls)
    return "TLS failed: " + message +
           " (does the server serve TLS, with a certificate that the CA given (ca_file, ca_path, "
           "--ca-file, --ca-path) signed and that names this address?)";
  return message +
         " (if the server serves TLS, give its CA: ca_file or ca_path, --ca-file or "
         "--ca-path)";
}

[[noreturn]] void throw_status(const dataecho_grpc_status& s, const std::string& method,
                               const std::string& target, bool tls = false) {
  throw CallError(static_cast<CallCode>(s.code), with_tls_hint(s, tls), method, target);
}

class GrpcStream final : public ClientStream {
 public:
  GrpcStream(const Plugin& p, void* stream, std::string method, std::string target, bool tls)
      : p_(p), stream_(stream), method_(std::move(method)), target_(std::move(target)), tls_(tls) {}
  ~GrpcStream() override { p_.stream_free(stream_); }

  Next next(Frame& frame, int64_t timeout_ms) override {
    frame.clear();
    struct Sink {
      decltype(p_.slice_unref) unref;
      Frame* frame;
    } sink{p_.slice_unref, &frame};
    auto take = [](void* user, dataecho_grpc_slice s) {
      auto* out = static_cast<Sink*>(user);
      out->frame->push_back(Buffer::wrap(
          static_cast<std::byte*>(const_cast<void*>(s.data)), s.size,
          [unref = out->unref, ref = s.ref] { unref(ref); }, s.size));
    };
    dataecho_grpc_status status{};
    const int r = p_.stream_next(stream_, timeout_ms, take, &sink, &status);
    if (r == DATAECHO_GRPC_STREAM_FRAME) return Next::kFrame;
    if (r == DATAECHO_GRPC_STREAM_TIMEOUT) return Next::kTimeout;
    if (status.code != DATAECHO_GRPC_OK) throw_status(status, method_, target_, tls_);
    return Next::kEnd;
  }

  void cancel() override { p_.stream_cancel(stream_); }

 private:
  const Plugin p_;  // function pointers: copied
  void* stream_;
  std::string method_, target_;
  bool tls_;
};

class GrpcChannel final : public Channel {
 public:
  GrpcChannel(const Plugin& p, void* channel, std::string target, bool tls)
      : p_(p), channel_(channel), target_(std::move(target)), tls_(tls) {}
  ~GrpcChannel() override { p_.channel_free(channel_); }
  const std::string& target() const override { return target_; }

  std::string unary(const std::string& method, std::string_view request,
                    const CallOptions& o) override {
    std::string reply;
    auto sink = [](void* out, const void* data, size_t size) {
      static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
    };
    dataecho_grpc_status status{};
    if (p_.unary(channel_, method.c_str(), request.data(), request.size(), o.deadline_ms,
                 o.token.c_str(), sink, &reply, &status) != DATAECHO_GRPC_OK)
      throw_status(status, method, target_, tls_);
    return reply;
  }

  std::unique_ptr<ClientStream> stream(const std::string& method, std::string_view request,
                                       const CallOptions& o) override {
    dataecho_grpc_status status{};
    void* s = p_.stream_open(channel_, method.c_str(), request.data(), request.size(),
                             o.token.c_str(), &status);
    if (s == nullptr) throw_status(status, method, target_, tls_);
    return std::make_unique<GrpcStream>(p_, s, method, target_, tls_);
  }

 private:
  const Plugin p_;  // function pointers: copied
  void* channel_;
  std::string target_;
  bool tls_;
};

class GrpcServerCall final : public ServerCall {
 public:
  GrpcServerCall(const Plugin& p, dataecho_grpc_call* call) : p_(p), call_(call) {}
  bool write(const Frame& frame) override {
    std::vector<dataecho_grpc_out_slice> slices;
    slices.reserve(frame.size());
    for (const auto& buffer : frame) {
      // gRPC holds a reference to the buffer until its bytes are sent.
      auto* hold = new std::shared_ptr<const Buffer>(buffer);
      slices.push_back({buffer->data(), buffer->size(),
                        [](void* h) { delete static_cast<std::shared_ptr<const Buffer>*>(h); },
                        hold});
    }
    return p_.call_write(call_, slices.data(), slices.size()) == 0;
  }
  bool cancelled() override { return p_.call_cancelled(call_) != 0; }

 private:
  const Plugin p_;  // function pointers: copied
  dataecho_grpc_call* call_;
};

class GrpcServer final : public Server {
 public:
  GrpcServer(const Plugin& p, Handlers handlers) : p_(p), handlers_(std::move(handlers)) {}
  ~GrpcServer() override { stop(0); }

  void start(const std::string& address, const TransportOptions& options,
             const std::string& token) {
    const dataecho_grpc_options o = c_options(options);
    dataecho_grpc_handlers h{&unary, &is_stream, &stream};
    dataecho_grpc_status status{};
    server_ = p_.server_start(address.c_str(), &o, token.c_str(), &h, this, &port_, &status);
    if (server_ == nullptr) throw_status(status, "", address);
  }
  int port() const override { return port_; }
  void stop(int64_t grace_ms) override {
    if (server_ != nullptr) p_.server_stop(std::exchange(server_, nullptr), grace_ms);
  }

 private:
  static int unary(void* user, const char* method, const void* request, size_t size,
                   dataecho_grpc_sink reply, void* reply_user, char* error, size_t error_size) {
    auto* self = static_cast<GrpcServer*>(user);
    std::string message;
    const CallCode code = run_handler(
        [&] {
          if (!self->handlers_.unary)
            throw CallError(CallCode::kNotFound, "no method " + std::string(method));
          const std::string r = self->handlers_.unary(
              method, std::string_view(static_cast<const char*>(request), size));
          reply(reply_user, r.data(), r.size());
        },
        message);
    if (error_size > 0) {
      const size_t n = std::min(message.size(), error_size - 1);
      message.copy(error, n);
      error[n] = '\0';
    }
    return static_cast<int>(code);
  }
  static int is_stream(void* user, const char* method) {
    auto* self = static_cast<GrpcServer*>(user);
    return self->handlers_.is_stream && self->handlers_.is_stream(method) ? 1 : 0;
  }
  static void stream(void* user, const char* method, const void* request, size_t size,
                     dataecho_grpc_call* call) {
    auto* self = static_cast<GrpcServer*>(user);
    GrpcServerCall server_call(self->p_, call);
    std::string message;
    const CallCode code = run_handler(
        [&] {
          self->handlers_.stream(method, std::string_view(static_cast<const char*>(request), size),
                                 server_call);
        },
        message);
    self->p_.call_finish(call, static_cast<int>(code), message.c_str());
  }

  const Plugin p_;  // function pointers: copied
  Handlers handlers_;
  void* server_ = nullptr;
  int port_ = 0;
};

class GrpcTransport final : public Transport {
 public:
  explicit GrpcTransport(const Plugin& p) : p_(p) {}
  std::string name() const override { return "grpc"; }

  std::unique_ptr<Channel> open_channel(const std::string& target,
                                        const TransportOptions& options) override {
    const dataecho_grpc_options o = c_options(options);
    dataecho_grpc_status status{};
    void* ch = p_.channel_open(target.c_str(), &o, &status);
    if (ch == nullptr) throw_status(status, "", target);
    return std::make_unique<GrpcChannel>(p_, ch, target, !options.tls_root_pem.empty());
  }

  std::unique_ptr<Server> start_server(const std::string& address, const TransportOptions& options,
                                       const std::string& token, Handlers handlers) override {
    auto server = std::make_unique<GrpcServer>(p_, std::move(handlers));
    server->start(address, options, token);
    return server;
  }

 private:
  const Plugin p_;  // the library stays loaded for good
};

// Why this build has no plugin to load, or "".
std::string no_plugin_reason() {
#if defined(DATAECHO_NO_GRPC_PLUGIN)
  return DATAECHO_NO_GRPC_PLUGIN;
#else
  return "";
#endif
}

}  // namespace

std::vector<std::string> grpc_plugin_paths() {
  if (!no_plugin_reason().empty()) return {};
#if defined(DATAECHO_GRPC_PLUGIN_INSTALLED) && defined(DATAECHO_GRPC_PLUGIN_BUILT)
  return plugin_paths("DATAECHO_GRPC_PLUGIN", "libdataecho_grpc.so",
                      {DATAECHO_GRPC_PLUGIN_INSTALLED, DATAECHO_GRPC_PLUGIN_BUILT});
#else
  return plugin_paths("DATAECHO_GRPC_PLUGIN", "libdataecho_grpc.so", {});
#endif
}

std::shared_ptr<Transport> load_grpc_transport(const std::vector<std::string>& paths) {
  std::string tried;
  for (const std::string& path : paths) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why;
    Plugin plugin;
    if (lib == nullptr) {
      why = dlerror();
    } else if (const std::string missing = resolve(lib, plugin); !missing.empty()) {
      why = "no function " + missing;
    } else if (plugin.abi_version() != DATAECHO_GRPC_ABI_VERSION) {
      why = "interface version " + std::to_string(plugin.abi_version()) + ", this build needs " +
            std::to_string(DATAECHO_GRPC_ABI_VERSION);
    } else {
      return std::make_shared<GrpcTransport>(plugin);  // never unloaded
    }
    if (lib != nullptr) dlclose(lib);
    tried += (tried.empty() ? "" : "; ") + path + " (" + why + ")";
  }
  const std::string reason = no_plugin_reason();
  throw_error(ErrorCode::kNotFound, "service",
              "cannot load the gRPC plugin libdataecho_grpc.so: " +
                  (!tried.empty()    ? "tried " + tried + " (set DATAECHO_GRPC_PLUGIN to its path)"
                   : !reason.empty() ? reason
                                     : std::string("no path to try (set DATAECHO_GRPC_PLUGIN)")));
}

std::shared_ptr<Transport> grpc_transport() {
  static std::once_flag once;
  static std::shared_ptr<Transport> transport;
  static std::string error;
  std::call_once(once, [] {
    try {
      transport = load_grpc_transport(grpc_plugin_paths());
    } catch (const Error& e) {
      error = e.message();
    }
  });
  if (transport == nullptr) throw_error(ErrorCode::kNotFound, "service", error);
  return transport;
}

}  // namespace dataecho::service
