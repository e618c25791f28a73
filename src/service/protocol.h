// The service protocol's version, which every request's Hello carries (service.proto),
// and the check of a peer's: processes of another protocol are refused by name.
#pragma once

#include <cstdint>
#include <string>

#include "dataecho/proto/service.pb.h"

namespace dataecho::service {

// Raised whenever a message or its meaning changes incompatibly.
constexpr uint32_t kProtocolVersion = 1;

// This process's Hello: the protocol, dataecho's version and its role ("worker").
Hello make_hello(const std::string& role);

// Refuses a peer that speaks another protocol, naming both sides: "worker 10.0.0.5 speaks
// service protocol 2 (dataecho 0.2.0), this dispatcher 1 (dataecho 0.1.0)".
void check_hello(const Hello& peer, const std::string& peer_address, const std::string& own_role);

}  // namespace dataecho::service
