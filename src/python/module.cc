// dataecho._core: the Python extension behind `import dataecho` (python/dataecho/).
//
// It binds the C++ PipelineDef (dataecho/spec/pipeline_def.h): the package's PipelineDef
// wraps one, so Python and C++ share one builder, one set of editing methods and one
// validation; options, stats and advice cross as dicts and lists (values.h), states as
// bytes, never as JSON text. Every method of the bound definition returns a new one (a
// definition is small: the binding copies it), which gives Python its value semantics.
// A built pipeline hands out elements as DLPack capsules or numpy arrays over its own
// buffers (pipeline.h). The extension does not link LibTorch: torch turns the capsules
// into tensors (torch.utils.dlpack.from_dlpack) in the Python layer.
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dataecho/core/run_statistics.h"
#include "dataecho/formats/files.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/ops/pack.h"
#include "dataecho/service/service.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/echo_advice.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/spec_reader.h"
#include "pipeline.h"
#include "values.h"

namespace py = pybind11;

namespace dataecho::python {
namespace {

nlohmann::json options_of(const py::object& options, const std::string& path) {
  return options.is_none() ? nlohmann::json::object() : to_json(options, path);
}

std::vector<StageDef> stages_of(const py::object& stages) {
  return PipelineDef::stages_from_json(to_json(stages, "$.stages"));
}

// The ids of the Python callables the definition's map stages name.
std::vector<int64_t> callable_ids(const PipelineDef& d) {
  std::vector<int64_t> ids;
  for (const StageDef& s : d.stages()) {
    if (s.op != "map" || s.fn() != "python" || !s.options.contains("args")) continue;
    const nlohmann::json& args = s.options["args"];
    if (args.is_object() && args.contains("callable") && args["callable"].is_number_integer())
      ids.push_back(args["callable"].get<int64_t>());
  }
  return ids;
}

// The labels of the built pipeline's echo nodes ("3:echo, 5:echo").
std::string echo_labels(const Pipeline& p) {
  std::string out;
  for (const auto& node : p.stats().to_json()) {
    const std::string name = node.value("name", "");
    if (name.size() > 5 && name.ends_with(":echo")) out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "echo" : out;
}

std::unique_ptr<PyPipeline> build(const PipelineDef& d, const std::string& base_dir, bool fusion,
                                  bool as_numpy, bool share_buffers,
                                  std::optional<bool> check_shared) {
  BuildOptions o;
  o.base_dir = base_dir;
  o.map_and_batch_fusion = fusion;
  std::unique_ptr<Pipeline> p;
  {
    // Building opens files and URLs (it may wait on a server): other Python threads run.
    py::gil_scoped_release nogil;
    p = d.build(o);
  }
  HandOut h;
  h.as_numpy = as_numpy;
  h.share_buffers = share_buffers;
  const char* env = std::getenv("DATAECHO_CHECK_SHARED");
  h.check_shared = share_buffers && check_shared.value_or(env && std::string(env) == "1");
  if (h.check_shared) h.echo_stages = echo_labels(*p);
  return std::make_unique<PyPipeline>(std::move(p), callable_ids(d), std::move(h));
}

py::dict advise(const py::object& stats, const std::optional<PipelineDef>& def, int64_t batches,
                double upstream_ms, double downstream_ms) {
  EchoAdvice a = advise_echo(to_json(stats, "stats"), def, batches, upstream_ms, downstream_ms);
  py::dict out;
  out["r"] = a.r;
  out["slowest_stage"] = a.slowest_stage;
  out["slowest_stage_index"] = a.slowest_stage_index;
  out["recommended_factor"] = a.recommended_factor;
  out["factor_capped"] = a.factor_capped;
  out["placement"] = a.placement;
  out["recommended_spec"] = to_python(a.recommended_spec);
  out["recommendations"] = py::cast(a.recommendations);
  out["stages"] = to_python(a.stages);
  return out;
}

// A copy of `d` edited by `edit` (the bound methods' value semantics).
template <class F>
PipelineDef copy_with(const PipelineDef& d, F edit) {
  PipelineDef out = d;
  edit(out);
  return out;
}

// The stages: every op through its declaration (PipelineDef::declared_stage), so that the
// package's methods need no binding of their own; "stage" for ops without one.
void bind_stages(py::class_<PipelineDef>& c) {
  c.def(
      "declared_stage",
      [](const PipelineDef& d, const std::string& op, const py::object& options) {
        const std::string path = "$.stages[" + std::to_string(d.stages().size()) + "]";
        return copy_with(d,
                         [&](PipelineDef& o) { o.declared_stage(op, options_of(options, path)); });
      },
      py::arg("op"), py::arg("options") = py::none());
  c.def(
      "stage",
      [](const PipelineDef& d, std::string op, const py::object& options) {
        const std::string path = "$.stages[" + std::to_string(d.stages().size()) + "]";
        return copy_with(
            d, [&](PipelineDef& o) { o.stage(std::move(op), options_of(options, path)); });
      },
      py::arg("op"), py::arg("options") = py::none());
}

void bind_settings(py::class_<PipelineDef>& c) {
  c.def(
      "seed",
      [](const PipelineDef& d, uint64_t s) {
        return copy_with(d, [&](PipelineDef& o) { o.seed(s); });
      },
      py::arg("seed"));
  c.def(
      "deterministic",
      [](const PipelineDef& d, bool on) {
        return copy_with(d, [&](PipelineDef& o) { o.deterministic(on); });
      },
      py::arg("on"));
  c.def(
      "autotune",
      [](const PipelineDef& d, std::optional<double> cpu, std::optional<double> ram,
         bool remember) {
        return copy_with(d, [&](PipelineDef& o) {
          o.autotune({.cpu_budget = cpu, .ram_budget_mb = ram, .remember = remember});
        });
      },
      py::arg("cpu_budget") = py::none(), py::arg("ram_budget_mb") = py::none(),
      py::arg("remember") = true);
  c.def(
      "memory_check",
      [](const PipelineDef& d, std::optional<double> share, std::optional<double> limit_mb,
         std::optional<std::string> action) {
        return copy_with(d, [&](PipelineDef& o) {
          o.memory_check({.share = share, .limit_mb = limit_mb, .action = action});
        });
      },
      py::arg("share") = py::none(), py::arg("limit_mb") = py::none(),
      py::arg("action") = py::none());
}

void bind_edits(py::class_<PipelineDef>& c) {
  c.def("with_shard_first", &PipelineDef::with_shard_first, py::arg("num_shards"),
        py::arg("index"));
  c.def("with_elastic_first", &PipelineDef::with_elastic_first, py::arg("lanes"),
        py::arg("world_size"), py::arg("rank"));
  c.def(
      "with_mixed_seed",
      [](const PipelineDef& d, const std::vector<uint64_t>& salts) {
        PipelineDef out = d;
        for (uint64_t salt : salts) out = out.with_mixed_seed({salt});
        return out;
      },
      py::arg("salts"));
  c.def("without", &PipelineDef::without, py::arg("op"));
  c.def(
      "replacing",
      [](const PipelineDef& d, const std::string& op, const py::object& stages) {
        return d.replacing(op, stages_of(stages));
      },
      py::arg("op"), py::arg("stages"));
  c.def(
      "inserting",
      [](const PipelineDef& d, size_t at, const py::object& stages) {
        return d.inserting(at, stages_of(stages));
      },
      py::arg("at"), py::arg("stages"));
  c.def(
      "inserting_after",
      [](const PipelineDef& d, size_t index, const py::object& stages) {
        return d.inserting_after(index, stages_of(stages));
      },
      py::arg("index"), py::arg("stages"));
  c.def(
      "with_option",
      [](const PipelineDef& d, size_t index, const std::string& key, const py::object& value) {
        const nlohmann::json v = to_json(value, "$.stages[" + std::to_string(index) + "]." + key);
        if (v.is_boolean()) return d.with_option(index, key, v.get<bool>());
        if (v.is_number_unsigned()) return d.with_option(index, key, v.get<uint64_t>());
        if (v.is_number_integer()) return d.with_option(index, key, v.get<int64_t>());
        if (v.is_number_float()) return d.with_option(index, key, v.get<double>());
        if (v.is_string()) return d.with_option(index, key, v.get<std::string>());
        throw_spec_error("$.stages[" + std::to_string(index) + "]." + key,
                         "with_option sets a bool, a number or a string");
      },
      py::arg("index"), py::arg("key"), py::arg("value"));
  c.def(
      "with_source_option",
      [](const PipelineDef& d, const std::string& key, const py::object& value) {
        return d.with_source_option(key, to_json(value, "$.source." + key));
      },
      py::arg("key"), py::arg("value"));
  c.def("find", &PipelineDef::find, py::arg("op"), py::arg("fn") = "", py::arg("start") = 0);
  c.def("count", &PipelineDef::count, py::arg("op"));
}

void bind_definition(py::module_& m) {
  py::class_<PipelineDef> c(m, "PipelineDef",
                            "The C++ dataecho::PipelineDef (use dataecho.PipelineDef).");
  c.def(py::init([](std::string kind, const py::object& options) {
          return PipelineDef(std::move(kind), options_of(options, "$.source"));
        }),
        py::arg("kind"), py::arg("options") = py::none());
  c.def_static(
      "from_json",
      [](const py::object& spec) { return PipelineDef::from_json(to_json(spec, "$")); },
      py::arg("spec"));
  c.def_static(
      "from_file",
      [](const std::string& path) { return PipelineDef::from_json(load_spec_file(path)); },
      py::arg("path"));
  c.def("to_json", [](const PipelineDef& d) { return to_python(d.to_json()); });
  c.def_property_readonly("stages",
                          [](const PipelineDef& d) { return to_python(d.stages_to_json()); });
  c.def_property_readonly("source_kind", &PipelineDef::source_kind);
  c.def_property_readonly("source_options",
                          [](const PipelineDef& d) { return to_python(d.source_options()); });
  c.def(
      "option",
      [](const PipelineDef& d, size_t index, const std::string& key) -> py::object {
        if (index >= d.stages().size()) (void)d.option<bool>(index, key);  // throws, naming it
        const nlohmann::json& o = d.stages()[index].options;
        return o.contains(key) ? to_python(o[key]) : py::none();
      },
      py::arg("index"), py::arg("key"));
  c.def(py::self == py::self);
  c.def("__copy__", [](const PipelineDef& d) { return d; });
  bind_stages(c);
  bind_settings(c);
  bind_edits(c);
  c.def("build", &build, py::arg("base_dir") = "", py::arg("fusion") = true,
        py::arg("as_numpy") = false, py::arg("share_buffers") = false,
        py::arg("check_shared") = py::none());
}

void bind_pipeline(py::module_& m) {
  py::class_<PyPipeline>(m, "Pipeline", "A running pipeline (use dataecho.Pipeline).")
      .def("next", &PyPipeline::next)
      .def("save", &PyPipeline::save)
      .def("restore", &PyPipeline::restore, py::arg("state"))
      .def("stats", &PyPipeline::stats)
      .def("tuning", &PyPipeline::tuning)
      .def("elements_returned", &PyPipeline::elements_returned)
      .def("close", &PyPipeline::close)
      .def_property_readonly("closed", &PyPipeline::closed);
}

// ---------------------------------------------------------------- run statistics
// dataecho.stats (python/dataecho/stats.py): the engine's run statistics
// (dataecho/core/run_statistics.h), so that Python's figures are the trainer's.

// One observation per value, censored where the flag says so; the lengths must agree.
std::vector<Observation> observations(const std::vector<double>& values,
                                      const std::vector<bool>& censored, const char* side,
                                      const char* stage) {
  if (values.size() != censored.size())
    throw_error(ErrorCode::kInvalidArgument, stage,
                std::string(side) + "values and " + side + "censored differ in length (" +
                    std::to_string(values.size()) + " and " + std::to_string(censored.size()) +
                    "): one flag per value");
  std::vector<Observation> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) out.push_back({values[i], censored[i]});
  return out;
}

template <class Estimate>
py::object estimate_or_none(const std::optional<Estimate>& e) {
  return e ? to_python(e->to_json()) : py::none();
}

void bind_stats(py::module_& m) {
  m.def("median_of", &median_of, py::arg("values"));
  m.def(
      "estimate_median",
      [](const std::vector<double>& values, const std::vector<bool>& censored, int resamples,
         double level, uint64_t seed) {
        const auto runs = observations(values, censored, "", "estimate_median");
        std::optional<MedianEstimate> e;
        {
          py::gil_scoped_release nogil;
          e = estimate_median(runs, {.resamples = resamples, .level = level, .seed = seed});
        }
        return estimate_or_none(e);
      },
      py::arg("values"), py::arg("censored"), py::arg("resamples"), py::arg("level"),
      py::arg("seed"));
  m.def(
      "estimate_ratio",
      [](const std::vector<double>& base_values, const std::vector<bool>& base_censored,
         const std::vector<double>& cell_values, const std::vector<bool>& cell_censored,
         int resamples, double level, uint64_t seed) {
        const auto base = observations(base_values, base_censored, "base_", "estimate_ratio");
        const auto cell = observations(cell_values, cell_censored, "cell_", "estimate_ratio");
        std::optional<RatioEstimate> e;
        {
          py::gil_scoped_release nogil;
          e = estimate_ratio(base, cell, {.resamples = resamples, .level = level, .seed = seed});
        }
        return estimate_or_none(e);
      },
      py::arg("base_values"), py::arg("base_censored"), py::arg("cell_values"),
      py::arg("cell_censored"), py::arg("resamples"), py::arg("level"), py::arg("seed"));
}

// ---------------------------------------------------------------- the data service
// dataecho.service_status: the dispatcher's status, as `dataecho service status --json`
// prints it, over TLS when given the CA (ca_file, ca_path; tls_server_name). The service
// layer loads its gRPC plugin here, at the first call, never at import
// (tests/python/test_service.py reads /proc/self/maps).
void bind_service(py::module_& m) {
  m.def(
      "service_status",
      [](const std::string& address, const std::string& token_file, double timeout_s,
         const std::string& ca_file, const std::string& ca_path,
         const std::string& tls_server_name) {
        nlohmann::json status;
        {
          py::gil_scoped_release nogil;  // waits on the network
          service::TlsOptions tls;
          tls.root_pem = service::read_ca_roots(ca_file, ca_path, "ca_file", "ca_path");
          tls.server_name = tls_server_name;
          status = service::service_status(address, service::read_token(token_file, "token_file"),
                                           timeout_s, nullptr, tls);
        }
        return to_python(status);
      },
      py::arg("address"), py::arg("token_file") = "", py::arg("timeout_s") = 10.0,
      py::arg("ca_file") = "", py::arg("ca_path") = "", py::arg("tls_server_name") = "");
}

void add_exceptions(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "dataecho.Error",
      "An error of dataecho's engine: .code, .stage and .input say what and where.",
      PyExc_RuntimeError, nullptr);
  py::tuple spec_bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_spec_error = PyErr_NewExceptionWithDoc(
      "dataecho.SpecError",
      "A wrong spec, option or call; the message starts with the JSON path ($.stages[2].size).",
      spec_bases.ptr(), nullptr);
  g_data_error = PyErr_NewExceptionWithDoc(
      "dataecho.DataError",
      "Corrupt or truncated input data; the message names the file, the record and the offset.",
      g_error, nullptr);
  m.add_object("Error", py::handle(g_error));
  m.add_object("SpecError", py::handle(g_spec_error));
  m.add_object("DataError", py::handle(g_data_error));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_python(e);
    }
  });
}

}  // namespace
}  // namespace dataecho::python

PYBIND11_MODULE(_core, m) {
  using namespace dataecho::python;
  m.doc() = "dataecho's C++ engine (use the `dataecho` package, not this module)";
  // CMakeLists.txt's project(VERSION): the one version of the engine, the package and
  // its wheel (setup.py reads the same line).
  m.attr("__version__") = DATAECHO_VERSION;
  // pack's default names of its reads' fields (ops/pack.h), for PipelineDef.pack(reads=True).
  m.attr("PACK_READ_FIELDS") =
      pybind11::make_tuple(dataecho::kPackEpochsField, dataecho::kPackEchoesField);
  add_exceptions(m);
  register_python_map_function();
  bind_definition(m);
  start_sigint_watcher();  // before any pipeline: its thread is there from the import on
  bind_pipeline(m);
  m.def("advise", &advise, py::arg("stats"), py::arg("definition"), py::arg("batches"),
        py::arg("upstream_ms"), py::arg("downstream_ms"));
  m.def("class_to_idx", &dataecho::class_to_idx, py::arg("root"));
  m.def("register_callable", &register_callable, py::arg("fn"), py::arg("name"));
  m.def("unregister_callable", &unregister_callable, py::arg("id"));
  m.def("clear_tuner_memory", &dataecho::clear_tuner_memory);
  // Every rank's Pipeline.save() of an elastic pipeline, as one state; same_step false
  // for DataLoader workers' snapshots (ops/elastic.h).
  m.def(
      "merge_elastic_states",
      [](const std::vector<std::string>& states, bool same_step) {
        std::string merged;
        {
          pybind11::gil_scoped_release nogil;
          merged = dataecho::merge_elastic_states(states, same_step);
        }
        return pybind11::bytes(merged);
      },
      pybind11::arg("states"), pybind11::arg("same_step") = true);
  // An elastic state whose restore drops each lane's next skip[lane] elements.
  m.def(
      "with_lane_skips",
      [](const std::string& state, const std::map<int64_t, int64_t>& skip) {
        return pybind11::bytes(dataecho::with_lane_skips(state, skip));
      },
      pybind11::arg("state"), pybind11::arg("skip"));
  bind_stats(m);
  bind_service(m);
  m.def("copy_counters",
        [] { return py::make_tuple(g_copied_bytes.load(), g_shared_bytes.load()); });
}
