#include "dataecho/service/autoscale.h"

#include <utility>

#include "service/calls.h"

namespace dataecho::service {
namespace {

class DispatcherScaler final : public WorkerScaler {
 public:
  DispatcherScaler(std::string dispatcher, std::string token, TlsOptions tls,
                   std::shared_ptr<Transport> transport, double timeout_s)
      : dispatcher_(std::move(dispatcher)),
        token_(std::move(token)),
        tls_(std::move(tls)),
        transport_(transport ? std::move(transport) : default_transport()),
        timeout_s_(timeout_s) {}

  void set_workers(int64_t n, const std::string& reason) override {
    auto channel = transport_->open_channel(dispatcher_, client_transport(tls_));
    SetWorkersRequest request;
    request.set_workers(n);
    request.set_reason(reason);
    try {
      call_unary<SetWorkersRequest, SetWorkersReply>(
          *channel, kSetWorkers, request,
          {.deadline_ms = static_cast<int64_t>(timeout_s_ * 1000), .token = token_},
          {"consumer", "the spec's token_file"}, "dispatcher");
    } catch (const CallError& e) {
      throw Error(ErrorCode::kIo, "scale",
                  "the dispatcher at " + dispatcher_ + " cannot keep " + std::to_string(n) +
                      " workers: " + e.detail());
    }
  }

  Rates worker_rates() override {
    try {
      return rates_of_status(service_status(dispatcher_, token_, timeout_s_, transport_, tls_));
    } catch (const CallError& e) {
      throw Error(ErrorCode::kIo, "scale",
                  "the dispatcher at " + dispatcher_ + " gives no status: " + e.detail());
    }
  }

 private:
  const std::string dispatcher_;
  const std::string token_;
  const TlsOptions tls_;
  const std::shared_ptr<Transport> transport_;
  const double timeout_s_;
};

}  // namespace

std::shared_ptr<WorkerScaler> dispatcher_scaler(std::string dispatcher, std::string token,
                                                TlsOptions tls,
                                                std::shared_ptr<Transport> transport,
                                                double timeout_s) {
  return std::make_shared<DispatcherScaler>(std::move(dispatcher), std::move(token), std::move(tls),
                                            std::move(transport), timeout_s);
}

WorkerScaler::Rates rates_of_status(const nlohmann::json& status) {
  WorkerScaler::Rates r;
  if (!status.contains("workers")) return r;
  for (const auto& w : status["workers"]) {
    const std::string state = w.value("state", "");
    if (state != "alive" && !(state.empty() && w.value("alive", false))) continue;
    ++r.serving;
    const double rate = w.value("rate", 0.0);
    if (rate > 0) r.rates.push_back(rate);
  }
  return r;
}

}  // namespace dataecho::service
