// The C interface of libdataecho_grpc.so, the plugin that holds gRPC (grpc_plugin/
// grpc_plugin.cc). Why a plugin: gRPC and its abseil libraries add 11 ms and 5 MB of
// memory to a process that loads them, and `import dataecho` or `dataecho pipe` must
// not pay that; only the data service's processes load it (grpc_transport.cc, with
// dlopen). The plugin links gRPC alone, no engine code: what crosses this interface is
// bytes, C strings and callbacks.
//
// Calls are gRPC's generic calls (no generated stubs): a method is a path such as
// "/dataecho.service.Dispatcher/GetSplit", requests and replies are bytes (protobuf
// messages or frames) that the engine encodes. A unary call sends one request and gets
// one reply; a server stream sends one request and gets frames until the server
// finishes. A received frame is handed out as slices of gRPC's own buffers
// ({data, size, ref}), no copy: the receiver owns one reference per slice and gives it
// back with dataecho_grpc_slice_unref.
#pragma once

#include <stddef.h>
#include <stdint.h>

// The functions have C linkage (dlsym finds them by these names).
#ifdef __cplusplus
#define DATAECHO_GRPC_API extern "C"
#else
#define DATAECHO_GRPC_API
#endif

// The interface's version: the loader refuses a plugin of another one. A change of a
// function's signature or of a struct's layout takes the next number.
//   1: the first interface.
//   2: dataecho_grpc_options gains the TLS fields (tls_*).
#define DATAECHO_GRPC_ABI_VERSION 2

// gRPC's status codes (grpc::StatusCode), the ones the engine tells apart.
enum {
  DATAECHO_GRPC_OK = 0,
  DATAECHO_GRPC_CANCELLED = 1,
  DATAECHO_GRPC_UNKNOWN = 2,
  DATAECHO_GRPC_INVALID_ARGUMENT = 3,
  DATAECHO_GRPC_DEADLINE_EXCEEDED = 4,
  DATAECHO_GRPC_NOT_FOUND = 5,
  DATAECHO_GRPC_INTERNAL = 13,
  DATAECHO_GRPC_UNAVAILABLE = 14,
  DATAECHO_GRPC_UNAUTHENTICATED = 16,
};

typedef struct dataecho_grpc_status {
  int code;
  char message[512];
} dataecho_grpc_status;

// Connection settings, for channels and servers alike. 0 (or -1 for the sizes) keeps
// gRPC's default where one is said.
typedef struct dataecho_grpc_options {
  int32_t keepalive_ms;          // ping an idle connection this often (0: never)
  int32_t keepalive_timeout_ms;  // a ping unanswered this long closes it
  // Servers: the shortest interval between client pings that they accept (a client
  // pinging more often gets GOAWAY "too_many_pings"); must not exceed clients' keepalive_ms.
  int32_t min_ping_interval_ms;
  int64_t max_message_bytes;  // largest message sent or received; -1: unlimited
  // TLS, as PEM text (null or empty: plaintext). A channel with roots speaks TLS and
  // trusts only them; a server with a certificate and its key serves TLS only.
  const char* tls_root_pem;     // channels: the CAs trusted
  const char* tls_cert_pem;     // servers: the certificate (chain)
  const char* tls_key_pem;      // servers: its private key
  const char* tls_server_name;  // channels: the name checked in the server's certificate
                                // instead of the target's host (null or empty: the host)
} dataecho_grpc_options;

// A received slice: `data` stays valid until `ref` is given back.
typedef struct dataecho_grpc_slice {
  const void* data;
  size_t size;
  void* ref;
} dataecho_grpc_slice;

// A slice to send: `release(user)` runs once gRPC is done with the bytes (no copy is
// made); a null `release` means the bytes are copied at once.
typedef struct dataecho_grpc_out_slice {
  const void* data;
  size_t size;
  void (*release)(void* user);
  void* user;
} dataecho_grpc_out_slice;

// Receives the bytes of a unary reply or request, slice by slice, valid during the call.
typedef void (*dataecho_grpc_sink)(void* user, const void* data, size_t size);

// Receives one slice of a streamed frame; the receiver owns its reference.
typedef void (*dataecho_grpc_slice_sink)(void* user, dataecho_grpc_slice slice);

DATAECHO_GRPC_API uint32_t dataecho_grpc_abi_version(void);
// gRPC's version string ("1.51.1").
DATAECHO_GRPC_API const char* dataecho_grpc_library_version(void);
DATAECHO_GRPC_API void dataecho_grpc_slice_unref(void* ref);

// ---- clients ----

// A channel to "host:port" (connects lazily); null with `status` on a bad target.
DATAECHO_GRPC_API void* dataecho_grpc_channel_open(const char* target,
                                                   const dataecho_grpc_options* options,
                                                   dataecho_grpc_status* status);
DATAECHO_GRPC_API void dataecho_grpc_channel_free(void* channel);

// One request, one reply, within `deadline_ms` (0: none); `token` (may be null or
// empty) goes in the x-dataecho-token metadata. Returns the status code (0: ok, the
// reply went to `sink`); `status` says what failed.
DATAECHO_GRPC_API int dataecho_grpc_unary(void* channel, const char* method, const void* request,
                                          size_t request_size, int64_t deadline_ms,
                                          const char* token, dataecho_grpc_sink sink,
                                          void* sink_user, dataecho_grpc_status* status);

// A server stream: sends `request` and receives frames. Reads ahead at most two frames:
// a receiver that stops taking frames stops the sender (HTTP/2's flow control).
DATAECHO_GRPC_API void* dataecho_grpc_stream_open(void* channel, const char* method,
                                                  const void* request, size_t request_size,
                                                  const char* token, dataecho_grpc_status* status);
enum {
  DATAECHO_GRPC_STREAM_FRAME = 1,    // a frame's slices went to the sink
  DATAECHO_GRPC_STREAM_END = 0,      // the server finished: `status` says how
  DATAECHO_GRPC_STREAM_TIMEOUT = 2,  // nothing within timeout_ms
};
// Waits at most `timeout_ms` (-1: without limit) for the next frame.
DATAECHO_GRPC_API int dataecho_grpc_stream_next(void* stream, int64_t timeout_ms,
                                                dataecho_grpc_slice_sink sink, void* sink_user,
                                                dataecho_grpc_status* status);
// Ends the call: the server's pending and later writes fail. Frames already received
// stay readable; stream_next then ends with CANCELLED.
DATAECHO_GRPC_API void dataecho_grpc_stream_cancel(void* stream);
// Cancels the call if it runs and frees it.
DATAECHO_GRPC_API void dataecho_grpc_stream_free(void* stream);

// ---- servers ----

// A call being served, as its handler sees it.
typedef struct dataecho_grpc_call dataecho_grpc_call;

typedef struct dataecho_grpc_handlers {
  // A unary method: the reply goes to `reply(reply_user, ...)`; returns a status code,
  // with a message in `error` on failure. Null: no unary methods.
  int (*unary)(void* user, const char* method, const void* request, size_t request_size,
               dataecho_grpc_sink reply, void* reply_user, char* error, size_t error_size);
  // Returns 1 if `method` is served as a stream (by `stream`), else it is unary.
  int (*is_stream)(void* user, const char* method);
  // A server-stream method: writes frames with dataecho_grpc_call_write and ends with
  // dataecho_grpc_call_finish (returning without finishing finishes with OK).
  void (*stream)(void* user, const char* method, const void* request, size_t request_size,
                 dataecho_grpc_call* call);
} dataecho_grpc_handlers;

// Listens on `address` ("127.0.0.1:0": any port, which goes to `*port`). Handlers run
// on threads of their own, one per call, and may block. Calls without `token` (when
// non-empty) in their x-dataecho-token metadata are refused with UNAUTHENTICATED.
DATAECHO_GRPC_API void* dataecho_grpc_server_start(
    const char* address, const dataecho_grpc_options* options, const char* token,
    const dataecho_grpc_handlers* handlers, void* user, int* port, dataecho_grpc_status* status);
// Sends one frame made of `slices`; blocks until gRPC has taken it (0) or the call is
// cancelled or broken (-1: the handler should finish).
DATAECHO_GRPC_API int dataecho_grpc_call_write(dataecho_grpc_call* call,
                                               const dataecho_grpc_out_slice* slices, size_t count);
// 1 once the client cancelled or the connection broke.
DATAECHO_GRPC_API int dataecho_grpc_call_cancelled(dataecho_grpc_call* call);
DATAECHO_GRPC_API void dataecho_grpc_call_finish(dataecho_grpc_call* call, int code,
                                                 const char* message);
// Stops accepting calls, lets calls run for `grace_ms` more, then cancels the rest and
// waits for their handlers to return; frees the server.
DATAECHO_GRPC_API void dataecho_grpc_server_stop(void* server, int64_t grace_ms);
