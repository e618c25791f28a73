// The data service's side of the decision loop (core/autoscale.h): a WorkerScaler that
// asks the dispatcher. set_workers() is a SetWorkers call (the dispatcher's launcher
// starts or asks to leave workers up to the number; its reason shows in the status);
// worker_rates() a Status call: the workers alive and not leaving, and the rates of those
// measured (a rate above 0).
#pragma once

#include <memory>
#include <string>

#include "dataecho/core/autoscale.h"
#include "dataecho/service/service.h"

namespace dataecho::service {

// Each call within `timeout_s`; a failure is an Error naming the dispatcher.
std::shared_ptr<WorkerScaler> dispatcher_scaler(std::string dispatcher, std::string token,
                                                TlsOptions tls,
                                                std::shared_ptr<Transport> transport = nullptr,
                                                double timeout_s = 5);

// The serving workers and their rates in a status (service_status()'s JSON).
WorkerScaler::Rates rates_of_status(const nlohmann::json& status);

}  // namespace dataecho::service
