// The service tests' worker: on loopback, at the dispatcher listening on `dispatcher_port`,
// beating every 100 ms and giving up on the dispatcher after 5 s.
#pragma once

#include <string>

#include "dataecho/service/service.h"

namespace dataecho::service {

inline WorkerOptions loopback_worker(int dispatcher_port) {
  WorkerOptions o;
  o.dispatcher = "127.0.0.1:" + std::to_string(dispatcher_port);
  o.bind = "127.0.0.1";
  o.beat_ms = 100;
  o.connect_timeout_s = 5;
  return o;
}

}  // namespace dataecho::service
