#include "service/protocol.h"

#include "dataecho/core/error.h"

namespace dataecho::service {

Hello make_hello(const std::string& role) {
  Hello hello;
  hello.set_protocol(kProtocolVersion);
  hello.set_version(DATAECHO_VERSION);
  hello.set_name(role);
  return hello;
}

void check_hello(const Hello& peer, const std::string& peer_address, const std::string& own_role) {
  if (peer.protocol() == kProtocolVersion) return;
  const std::string who =
      (peer.name().empty() ? std::string("peer") : peer.name()) + " " + peer_address;
  throw_error(ErrorCode::kInvalidArgument, "service",
              who + " speaks service protocol " + std::to_string(peer.protocol()) + " (dataecho " +
                  (peer.version().empty() ? "?" : peer.version()) + "), this " + own_role + " " +
                  std::to_string(kProtocolVersion) + " (dataecho " + DATAECHO_VERSION + ")");
}

}  // namespace dataecho::service
