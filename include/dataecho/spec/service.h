// The data service's worker with the spec layer's pipeline builder (docs/service.md):
// what `dataecho worker` starts. The service layer (dataecho/service/service.h) cannot
// build pipelines itself; this builder is PipelineDef::from_json of the job's upstream,
// its seed salted by the worker's number and the epoch, its CPU budget the worker's
// threads.
#pragma once

#include <memory>

#include "dataecho/service/service.h"

namespace dataecho {

service::UpstreamBuilder service_upstream_builder();

// service::start_worker with service_upstream_builder() (unless `options` has a builder).
std::unique_ptr<service::Worker> start_service_worker(service::WorkerOptions options);

}  // namespace dataecho
