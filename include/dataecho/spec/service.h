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
// Sharding "dynamic": the plan of an upstream's source (the elastic plan of its
// record_index(), about 2,000 records a piece and at least 4 pieces a lane, seeded by the
// upstream's seed), and a lease's pipeline (the upstream's stages over the piece's
// source, its seed mixed with the epoch after the first).
service::PlanFn service_plan_builder();
service::PieceBuilder service_piece_builder();

// service::start_worker with service_upstream_builder() (unless `options` has a builder).
std::unique_ptr<service::Worker> start_service_worker(service::WorkerOptions options);
// service::start_dispatcher with service_plan_builder() (unless `options` has a plan).
std::unique_ptr<service::Dispatcher> start_service_dispatcher(service::DispatcherOptions options);

}  // namespace dataecho
