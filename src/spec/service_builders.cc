// The `service` source (docs/service.md): a pipeline whose upstream runs on the data
// service's workers. The spec names the dispatcher, the job and the upstream pipeline;
// the builder checks the upstream's structure, seeds it from the job's name when it has
// no seed (equal on every trainer and resume), fingerprints it, and makes the service
// layer's source. Also the worker's upstream builder, which the service layer cannot
// have (it is below spec), and the C++ service_source().
#include "dataecho/core/hash.h"
#include "dataecho/core/rng.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"
#include "dataecho/spec/service.h"
#include "spec/nested_pipeline.h"
#include "spec/service_scale.h"

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

// Sharding "dynamic" and "static" read pieces from their middle and number elements by
// their records: the upstream's stages must be element-wise (map, filter).
void refuse_not_element_wise(const PipelineDef& d, const std::string& path,
                             const std::string& sharding) {
  for (size_t i = 0; i < d.stages().size(); ++i) {
    const std::string& op = d.stages()[i].op;
    if (op == "map" || op == "filter") continue;
    throw_spec_error(path + ".stages[" + std::to_string(i) + "]",
                     "sharding \"" + sharding +
                         "\" runs only element-wise stages (map, filter) on the "
                         "workers: move `" +
                         op +
                         "` after the service source, on the trainer's side (or use sharding "
                         "\"off\")");
  }
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
  o.sharding = s.get_string("sharding");
  const bool pieces = o.sharding == "dynamic" || o.sharding == "static";
  o.lanes = static_cast<int>(s.get_int("lanes"));
  o.consumers = static_cast<int>(s.get_int("consumers"));
  o.consumer = static_cast<int>(s.get_int("consumer"));
  if (pieces && o.lanes % o.consumers != 0) {
    std::string use;
    for (int n = 1; n < o.lanes; ++n)
      if (o.lanes % n == 0) use += std::to_string(n) + ", ";
    use = use.substr(0, use.size() - 2) + " or " + std::to_string(o.lanes);
    throw_spec_error(s.field_path("consumers"),
                     std::to_string(o.lanes) + " lanes do not split over " +
                         std::to_string(o.consumers) + " consumers: use " + use);
  }
  if (o.consumer >= o.consumers)
    throw_spec_error(s.field_path("consumer"), "consumer " + std::to_string(o.consumer) + " of " +
                                                   std::to_string(o.consumers) +
                                                   ": give one in [0, consumers)");
  o.epoch = s.get_int("epoch");
  o.buffer_mb = s.get_int("buffer_mb");
  o.connect_timeout_s = s.get_number("connect_timeout_s");
  const std::string token_file = s.get_string("token_file");
  o.token =
      service::read_token(token_file.empty() ? "" : resolve_spec_path(ctx.base_dir, token_file),
                          s.field_path("token_file"));
  const std::string ca_file = s.get_string("ca_file"), ca_path = s.get_string("ca_path");
  o.tls.root_pem =
      service::read_ca_roots(ca_file.empty() ? "" : resolve_spec_path(ctx.base_dir, ca_file),
                             ca_path.empty() ? "" : resolve_spec_path(ctx.base_dir, ca_path),
                             s.field_path("ca_file"), s.field_path("ca_path"));
  o.tls.server_name = s.get_string("tls_server_name");
  const nlohmann::json* upstream = s.raw("pipeline");
  if (upstream == nullptr) throw_spec_error(s.field_path("pipeline"), "missing");
  const PipelineDef d = upstream_of(*upstream, s.field_path("pipeline"), o.job);
  if (pieces) refuse_not_element_wise(d, s.field_path("pipeline"), o.sharding);
  o.upstream_json = d.to_json().dump();
  o.fingerprint = d.fingerprint();
  o.scale = make_scale_policy(s, o);
  return service::make_service_source(std::move(o));
}

// The service source's options for reaching the service: its token, timeout and TLS.
std::vector<OptionDecl> connection_options() {
  return {{.name = "token_file",
           .type = OptionType::kString,
           .fallback = "",
           .doc = "a file whose first line is the service's token (\"\": "
                  "$DATAECHO_SERVICE_TOKEN, or none)"},
          {.name = "connect_timeout_s",
           .type = OptionType::kNumber,
           .fallback = 30,
           .min = 0.001,
           .doc = "how long to wait for the dispatcher, a first worker, or a cut stream to reopen"},
          {.name = "ca_file",
           .type = OptionType::kString,
           .fallback = "",
           .doc = "PEM certificates of the CA(s) that signed the dispatcher's and workers' TLS "
                  "certificates: calls use TLS (\"\": plaintext)"},
          {.name = "ca_path",
           .type = OptionType::kString,
           .fallback = "",
           .doc = "a folder of such PEM files (*.pem, *.crt), joined (with or instead of ca_file)"},
          {.name = "tls_server_name",
           .type = OptionType::kString,
           .fallback = "",
           .doc = "the name the servers' TLS certificates must carry (\"\": the host dialled)"}};
}

}  // namespace

void register_service_builders(Registry& r) {
  OpSchema schema{
      "service",
      "The elements of a pipeline that runs on the data service's workers (docs/service.md); "
      "the token comes from token_file or DATAECHO_SERVICE_TOKEN, never from the spec.",
      {
          {.name = "dispatcher",
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
           .doc = "\"off\": each worker makes its own passes of the whole upstream; \"dynamic\": "
                  "the source's pieces leased to the workers, each record's element once per "
                  "epoch (an element-wise upstream: map, filter), in the order they come; "
                  "\"static\": the same pieces, one in flight per lane, each consumer's "
                  "elements in the same order on every run and resume, whichever workers "
                  "compute them"},
          {.name = "lanes",
           .fallback = 12,
           .min = 1,
           .max = 1 << 16,
           .doc = "dynamic and static: the lanes the pieces are dealt to (consumers must divide "
                  "them)"},
          {.name = "consumers",
           .fallback = 1,
           .min = 1,
           .max = 1 << 16,
           .doc = "dynamic and static: the job's consumers (trainer ranks); consumer r owns lanes "
                  "k mod consumers == r"},
          {.name = "consumer",
           .fallback = 0,
           .min = 0,
           .max = 1 << 16,
           .doc = "dynamic and static: this consumer's number"},
          {.name = "epoch",
           .fallback = 0,
           .min = 0,
           .max = 1 << 30,
           .doc = "the job's epoch that the first pass reads (a repeat after the source reads the "
                  "next ones); the trainer's side sets it for each epoch (Python's for_epoch: a "
                  "pipeline's pass k reads epoch + k)"},
          {.name = "buffer_mb",
           .fallback = 64,
           .min = 1,
           .max = 1 << 20,
           .doc = "MiB of elements read ahead from all workers together"},
      }};
  for (OptionDecl& d : connection_options()) schema.options.push_back(std::move(d));
  schema.options.push_back(service_scale_option());
  r.add_source(std::move(schema), build_service);
}

namespace {

// A worker's pipeline of `d`, within `threads` cores (0: the pipeline's own budget).
std::unique_ptr<Pipeline> build_within(PipelineDef& d, int threads) {
  if (threads > 0) {
    AutotuneOptions a = d.autotune();
    a.cpu_budget = threads;
    d.autotune(a);
  }
  return d.build();
}

}  // namespace

service::UpstreamBuilder service_upstream_builder() {
  return [](const std::string& json, int64_t worker, int64_t epoch, int threads) {
    PipelineDef d =
        PipelineDef::from_json(nlohmann::json::parse(json))
            .with_mixed_seed({static_cast<uint64_t>(worker), static_cast<uint64_t>(epoch)});
    return build_within(d, threads);
  };
}

namespace {

// The upstream's source alone, built as the whole upstream builds it (node 0).
DatasetPtr upstream_source(const nlohmann::json& upstream) {
  nlohmann::json j = {{"source", upstream.at("source")}};
  if (upstream.contains("seed")) j["seed"] = upstream.at("seed");
  std::vector<DatasetPtr> nodes;
  return PipelineDef::from_json(j).build_nodes(BuildOptions{}, "", nodes);
}

// Pieces per lane: about 2,000 records a piece, at least 4 per lane.
int64_t pieces_per_lane(int64_t records, int64_t lanes) {
  return std::max<int64_t>(4, (records + lanes * 2000 - 1) / (lanes * 2000));
}

}  // namespace

service::PlanFn service_plan_builder() {
  return [](const std::string& json, int lanes) {
    const auto upstream = nlohmann::json::parse(json);
    const DatasetPtr source = upstream_source(upstream);
    if (const std::string why = source->not_seekable_reason(); !why.empty())
      throw_error(ErrorCode::kInvalidArgument, "service", why);
    const auto index = source->record_index();
    int64_t records = 0;
    for (const ShardIndex& s : index) records += s.records;
    const uint64_t seed = upstream.value("seed", uint64_t{0});
    auto plan =
        std::make_shared<const ElasticPlan>(index, lanes, pieces_per_lane(records, lanes), seed);
    auto job = std::make_shared<service::JobPlan>();
    job->pieces = plan->pieces();
    job->lanes_of = [plan](int64_t epoch) {
      std::vector<int32_t> lane_of(plan->pieces().size());
      for (int64_t k = 0; k < plan->lanes(); ++k)
        for (int64_t p : plan->lane_pieces(k, epoch)) lane_of[static_cast<size_t>(p)] = k;
      return lane_of;
    };
    job->json = nlohmann::json{{"lanes", plan->lanes()},
                               {"pieces_per_lane", plan->pieces_per_lane()},
                               {"seed", plan->seed()},
                               {"records", plan->records()}}
                    .dump();
    return std::shared_ptr<const service::JobPlan>(job);
  };
}

service::PieceBuilder service_piece_builder() {
  return [](const std::string& json, int64_t epoch, int threads,
            const std::function<DatasetPtr(std::shared_ptr<const Dataset>)>& piece_source) {
    const auto upstream = nlohmann::json::parse(json);
    PipelineDef d = PipelineDef::from_dataset(piece_source(upstream_source(upstream)), "piece");
    d.mutable_stages() =
        PipelineDef::stages_from_json(upstream.value("stages", nlohmann::json::array()));
    if (upstream.contains("seed")) d.seed(upstream.at("seed").get<uint64_t>());
    if (epoch > 0) d = d.with_mixed_seed({static_cast<uint64_t>(epoch)});
    return build_within(d, threads);
  };
}

std::unique_ptr<service::Worker> start_service_worker(service::WorkerOptions options) {
  if (!options.builder) options.builder = service_upstream_builder();
  if (!options.piece_builder) options.piece_builder = service_piece_builder();
  return service::start_worker(options);
}

std::unique_ptr<service::Dispatcher> start_service_dispatcher(service::DispatcherOptions options) {
  if (!options.plan) options.plan = service_plan_builder();
  return service::start_dispatcher(options);
}

PipelineDef service_source(const PipelineDef& upstream, ServiceOptions options) {
  nlohmann::json o = {
      {"dispatcher", options.dispatcher}, {"job", options.job}, {"pipeline", upstream.to_json()}};
  if (options.sharding != "off") o["sharding"] = options.sharding;
  if (options.epoch != 0) o["epoch"] = options.epoch;
  if (options.buffer_mb != 64) o["buffer_mb"] = options.buffer_mb;
  if (!options.token_file.empty()) o["token_file"] = options.token_file;
  if (options.connect_timeout_s != 30) o["connect_timeout_s"] = options.connect_timeout_s;
  if (!options.ca_file.empty()) o["ca_file"] = options.ca_file;
  if (!options.ca_path.empty()) o["ca_path"] = options.ca_path;
  if (!options.tls_server_name.empty()) o["tls_server_name"] = options.tls_server_name;
  return PipelineDef("service", std::move(o));
}

}  // namespace dataecho
