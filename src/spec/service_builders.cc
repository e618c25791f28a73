// The `service` source (docs/service.md): a pipeline whose upstream runs on the data
// service's workers. The spec names the dispatcher, the job and the upstream pipeline;
// the builder checks the upstream's structure, seeds it from the job's name when it has
// no seed (equal on every trainer and resume), fingerprints it, and makes the service
// layer's source. Also the worker's upstream builder, which the service layer cannot
// have (it is below spec), and the C++ service_source().
#include "dataecho/core/hash.h"
#include "dataecho/core/rng.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"
#include "dataecho/spec/service.h"
#include "spec/nested_pipeline.h"

namespace dataecho {
namespace {

// The upstream of a service source at `path` ($.source.pipeline), seeded from the job's
// name when it has no seed.
PipelineDef upstream_of(const nlohmann::json& j, const std::string& path, const std::string& job) {
  PipelineDef upstream;
  use_nested_pipeline(j, path, [&](PipelineDef& d, const nlohmann::json& spec) {
    if (!spec.contains("seed")) d.seed(mix_seed(fnv1a64(job), 0) >> 1);
    upstream = d;
  });
  return upstream;
}

// {"kind": "service", "dispatcher": "HOST:P", "job": "name", "pipeline": {...}, ...}
DatasetPtr build_service(SpecObject& s, BuildContext& ctx) {
  if (ctx.canonical != nullptr && ctx.canonical->contains("source") &&
      ctx.canonical->at("source").contains("token"))
    throw_spec_error(s.field_path("token"),
                     "a token in a spec is logged and checkpointed: give token_file or "
                     "DATAECHO_SERVICE_TOKEN");
  service::ServiceSourceOptions o;
  o.dispatcher = s.get_string("dispatcher");
  if (o.dispatcher.find(':') == std::string::npos)
    throw_spec_error(s.field_path("dispatcher"),
                     "expected HOST:PORT, got \"" + o.dispatcher + "\"");
  o.job = s.get_string("job");
  if (o.job.empty()) throw_spec_error(s.field_path("job"), "a job needs a name");
  const std::string sharding = s.get_string("sharding");
  if (sharding != "off")
    throw_spec_error(s.field_path("sharding"),
                     "sharding \"" + sharding +
                         "\" is not available yet: only \"off\" is (each worker makes its own "
                         "passes of the whole upstream)");
  o.buffer_mb = s.get_int("buffer_mb");
  o.connect_timeout_s = s.get_number("connect_timeout_s");
  const std::string token_file = s.get_string("token_file");
  o.token =
      service::read_token(token_file.empty() ? "" : resolve_spec_path(ctx.base_dir, token_file),
                          s.field_path("token_file"));
  const nlohmann::json* upstream = s.raw("pipeline");
  if (upstream == nullptr) throw_spec_error(s.field_path("pipeline"), "missing");
  const PipelineDef d = upstream_of(*upstream, s.field_path("pipeline"), o.job);
  o.upstream_json = d.to_json().dump();
  o.fingerprint = d.fingerprint();
  return service::make_service_source(std::move(o));
}

}  // namespace

void register_service_builders(Registry& r) {
  r.add_source(
      {"service",
       "The elements of a pipeline that runs on the data service's workers (docs/service.md); "
       "the token comes from token_file or DATAECHO_SERVICE_TOKEN, never from the spec.",
       {{.name = "dispatcher",
         .type = OptionType::kString,
         .required = true,
         .doc = "the dispatcher's HOST:PORT"},
        {.name = "job",
         .type = OptionType::kString,
         .required = true,
         .doc = "the job's name: trainers that name the same job and upstream share it"},
        {.name = "pipeline",
         .type = OptionType::kJson,
         .required = true,
         .shape = "a pipeline {\"source\": ..., \"stages\": [...]} or a source {\"kind\": ...}",
         .doc = "the upstream the workers run (seeded from the job's name when it has no seed)"},
        {.name = "sharding",
         .type = OptionType::kString,
         .fallback = "off",
         .choices = {"off", "dynamic", "static"},
         .doc = "\"off\": each worker makes its own passes of the whole upstream (\"dynamic\" "
                "and \"static\" are not available yet)"},
        {.name = "buffer_mb",
         .fallback = 64,
         .min = 1,
         .max = 1 << 20,
         .doc = "MiB of elements read ahead from all workers together"},
        {.name = "token_file",
         .type = OptionType::kString,
         .fallback = "",
         .doc = "a file whose first line is the service's token (\"\": "
                "$DATAECHO_SERVICE_TOKEN, or none)"},
        {.name = "connect_timeout_s",
         .type = OptionType::kNumber,
         .fallback = 30,
         .min = 0.001,
         .doc = "how long to wait for the dispatcher and a first worker"}}},
      build_service);
}

service::UpstreamBuilder service_upstream_builder() {
  return [](const std::string& json, int64_t worker, int64_t epoch, int threads) {
    PipelineDef d =
        PipelineDef::from_json(nlohmann::json::parse(json))
            .with_mixed_seed({static_cast<uint64_t>(worker), static_cast<uint64_t>(epoch)});
    if (threads > 0) {
      AutotuneOptions a = d.autotune();
      a.cpu_budget = threads;
      d.autotune(a);
    }
    return d.build();
  };
}

std::unique_ptr<service::Worker> start_service_worker(service::WorkerOptions options) {
  if (!options.builder) options.builder = service_upstream_builder();
  return service::start_worker(options);
}

PipelineDef service_source(const PipelineDef& upstream, ServiceOptions options) {
  nlohmann::json o = {
      {"dispatcher", options.dispatcher}, {"job", options.job}, {"pipeline", upstream.to_json()}};
  if (options.sharding != "off") o["sharding"] = options.sharding;
  if (options.buffer_mb != 64) o["buffer_mb"] = options.buffer_mb;
  if (!options.token_file.empty()) o["token_file"] = options.token_file;
  if (options.connect_timeout_s != 30) o["connect_timeout_s"] = options.connect_timeout_s;
  return PipelineDef("service", std::move(o));
}

}  // namespace dataecho
