// dataecho._core: the Python extension behind `import dataecho` (python/dataecho/).
//
// It builds pipelines from their JSON spec (the Python builder writes the same spec the
// C++ PipelineDef does, and PipelineDef::build makes the pipeline), hands out elements as
// DLPack capsules or numpy arrays over the pipeline's own buffers, and runs Python
// callables as map functions. It does not link LibTorch: torch turns the capsules into
// tensors (torch.utils.dlpack.from_dlpack), in the Python layer.
//
// Design choices, and why:
// - Writable without surprises. Tensors in the engine are immutable and shared (echoed
//   copies share their buffers), but torch tensors are writable: x.sub_(mean) on one
//   batch would change its echoed repeats. So an element's tensor is handed out without a
//   copy only when the element holds the only reference to its buffer (the common case: a
//   batch fresh from `batch`); a shared buffer (batch echo, an echoed example, a record
//   still inside its read chunk) is copied first. The copies are counted ("copied_bytes").
// - Ctrl-C. The pipeline runs on a puller thread of its own, one element per request (so
//   nothing is read ahead and save() sees the position of the last element handed out).
//   next() waits for it without the GIL, waking every 50 ms to run Python's signal
//   handlers: a KeyboardInterrupt cancels the pipeline, joins its threads and propagates.
// - Python map functions. A registered map function "python" looks the callable up by
//   the id in its args; it runs under the GIL, and an exception it raises is kept and
//   re-raised in the consumer, with its traceback, instead of the engine's error.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dataecho/core/example.h"
#include "dataecho/core/tensor.h"
#include "dataecho/pipeline.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/echo_advice.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"

namespace py = pybind11;

namespace dataecho::python {
namespace {

// ---------------------------------------------------------------- exceptions
PyObject* g_error = nullptr;       // dataecho.Error(RuntimeError)
PyObject* g_spec_error = nullptr;  // dataecho.SpecError(Error, ValueError)
PyObject* g_data_error = nullptr;  // dataecho.DataError(Error)

void raise_python(const Error& e) {
  PyObject* type = g_error;
  if (e.code() == ErrorCode::kInvalidArgument) type = g_spec_error;
  if (e.code() == ErrorCode::kDataLoss) type = g_data_error;
  py::object exc = py::reinterpret_borrow<py::object>(type)(e.what());
  exc.attr("code") = error_code_name(e.code());
  exc.attr("stage") = e.stage();
  exc.attr("input") = e.input();
  PyErr_SetObject(type, exc.ptr());
}

// ---------------------------------------------------------------- tensors out
std::optional<DLDataType> dl_dtype(DType t) {
  switch (t) {
    case DType::kUInt8:
      return DLDataType{kDLUInt, 8, 1};
    case DType::kInt32:
      return DLDataType{kDLInt, 32, 1};
    case DType::kInt64:
      return DLDataType{kDLInt, 64, 1};
    case DType::kFloat32:
      return DLDataType{kDLFloat, 32, 1};
    case DType::kFloat64:
      return DLDataType{kDLFloat, 64, 1};
  }
  return std::nullopt;
}

py::dtype np_dtype(DType t) {
  switch (t) {
    case DType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat64:
      return py::dtype::of<double>();
  }
  return py::dtype::of<uint8_t>();
}

// Keeps a tensor's buffer alive for as long as Python (a capsule, a torch tensor, a numpy
// array) uses its memory. Deleted from whichever thread drops the last reference: it
// holds no Python objects.
struct Holder {
  Tensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
};

void delete_managed(DLManagedTensor* m) { delete static_cast<Holder*>(m->manager_ctx); }

// Counts what handing tensors to Python cost: bytes copied because a buffer was shared.
std::atomic<int64_t> g_copied_bytes{0};
std::atomic<int64_t> g_shared_bytes{0};

// The tensor as one the caller may write: itself when `exclusive`, else a copy.
Tensor writable(Tensor t, bool exclusive) {
  if (exclusive && t.buffer()) {
    g_shared_bytes += static_cast<int64_t>(t.nbytes());
    return t;
  }
  if (t.buffer()) g_copied_bytes += static_cast<int64_t>(t.nbytes());
  const std::byte* src = t.raw_data();
  const size_t n = t.nbytes();
  return Tensor::make(t.dtype(), t.shape(), [&](std::byte* p) { std::memcpy(p, src, n); });
}

// Takes the example's fields out as (name, tensor the caller may write, its address).
struct OutField {
  std::string name;
  Tensor tensor;
};
std::vector<OutField> take_fields(Example&& e) {
  std::vector<OutField> out;
  auto& fields = e.mutable_fields();
  out.reserve(fields.size());
  for (auto& [name, t] : fields) {
    // The example holds one reference per field: more means another holder (an echo
    // stage's copy, a sibling record in the same read chunk, another field).
    const bool exclusive = t.buffer() && t.buffer().use_count() == 1;
    out.push_back({name, writable(std::move(t), exclusive)});
  }
  fields.clear();
  return out;
}

void delete_capsule(PyObject* capsule) {
  // Consumed capsules are renamed "used_dltensor" by the consumer, which then owns them.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    m->deleter(m);
  }
}

py::object to_capsule(Tensor t) {
  auto h = std::make_unique<Holder>();
  h->shape = t.shape();
  h->tensor = std::move(t);  // first: a small tensor's data lives inside the Tensor
  DLTensor& d = h->managed.dl_tensor;
  d.data = const_cast<std::byte*>(h->tensor.raw_data());
  d.device = DLDevice{kDLCPU, 0};
  d.ndim = static_cast<int32_t>(h->shape.size());
  d.dtype = *dl_dtype(h->tensor.dtype());
  d.shape = h->shape.empty() ? nullptr : h->shape.data();
  d.strides = nullptr;  // compact row-major
  d.byte_offset = 0;
  h->managed.manager_ctx = h.get();
  h->managed.deleter = delete_managed;
  PyObject* cap = PyCapsule_New(&h->managed, "dltensor", delete_capsule);
  if (!cap) throw py::error_already_set();
  h.release();
  return py::reinterpret_steal<py::object>(cap);
}

py::object to_numpy(Tensor t) {
  auto* h = new Holder{};
  h->shape = t.shape();
  py::dtype dt = np_dtype(t.dtype());
  h->tensor = std::move(t);  // first: a small tensor's data lives inside the Tensor
  const void* data = h->tensor.raw_data();
  py::capsule base(h, [](void* p) { delete static_cast<Holder*>(p); });
  return py::array(dt, h->shape, {}, data, base);
}

// ---------------------------------------------------------------- tensors in
Tensor from_numpy(const std::string& field, py::handle value) {
  py::array a = py::array::ensure(value, py::array::c_style);
  if (!a) {
    throw Error(ErrorCode::kInvalidArgument, "python",
                "field \"" + field + "\": expected a numpy array or torch tensor, got " +
                    std::string(py::str(py::type::handle_of(value).attr("__name__"))));
  }
  std::optional<DType> dt;
  if (a.dtype().is(py::dtype::of<uint8_t>()) || a.dtype().is(py::dtype::of<bool>()))
    dt = DType::kUInt8;
  else if (a.dtype().is(py::dtype::of<int32_t>()))
    dt = DType::kInt32;
  else if (a.dtype().is(py::dtype::of<int64_t>()))
    dt = DType::kInt64;
  else if (a.dtype().is(py::dtype::of<float>()))
    dt = DType::kFloat32;
  else if (a.dtype().is(py::dtype::of<double>()))
    dt = DType::kFloat64;
  if (!dt) {
    throw Error(ErrorCode::kInvalidArgument, "python",
                "field \"" + field + "\": dtype " + std::string(py::str(a.dtype())) +
                    " is not one of uint8, bool, int32, int64, float32, float64");
  }
  Shape shape(a.shape(), a.shape() + a.ndim());
  if (a.ndim() == 0) {
    switch (*dt) {
      case DType::kUInt8:
        return Tensor::scalar(*static_cast<const uint8_t*>(a.data()));
      case DType::kInt32:
        return Tensor::scalar(*static_cast<const int32_t*>(a.data()));
      case DType::kInt64:
        return Tensor::scalar(*static_cast<const int64_t*>(a.data()));
      case DType::kFloat32:
        return Tensor::scalar(*static_cast<const float*>(a.data()));
      case DType::kFloat64:
        return Tensor::scalar(*static_cast<const double*>(a.data()));
    }
  }
  return Tensor::from_data(*dt, std::move(shape), a.data(), static_cast<size_t>(a.nbytes()));
}

// ---------------------------------------------------------------- Python map functions
// A Python callable usable as map function "python" ({"fn": "python", "args": {"callable":
// id}}). `fn` takes a dict {field: numpy array} and returns a dict {field: numpy array}
// (the Python layer wraps the user's function to convert torch tensors both ways).
struct PyCallable {
  PyObject* fn = nullptr;  // strong reference
  std::string name;
  std::mutex mutex;
  PyObject* pending = nullptr;  // the exception it raised last, not yet re-raised (strong)

  ~PyCallable() {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_XDECREF(fn);
    Py_XDECREF(pending);
  }
  // With the GIL held: the exception it raised, if any (a new reference), and forgets it.
  PyObject* take_pending() {
    std::lock_guard<std::mutex> lock(mutex);
    PyObject* p = pending;
    pending = nullptr;
    return p;
  }
};

std::mutex g_callables_mutex;
std::map<int64_t, std::shared_ptr<PyCallable>> g_callables;
int64_t g_next_callable = 1;

int64_t register_callable(py::object fn, std::string name) {
  auto c = std::make_shared<PyCallable>();
  c->fn = fn.release().ptr();
  c->name = std::move(name);
  std::lock_guard<std::mutex> lock(g_callables_mutex);
  int64_t id = g_next_callable++;
  g_callables[id] = std::move(c);
  return id;
}

void unregister_callable(int64_t id) {
  std::shared_ptr<PyCallable> c;
  {
    std::lock_guard<std::mutex> lock(g_callables_mutex);
    auto it = g_callables.find(id);
    if (it == g_callables.end()) return;
    c = std::move(it->second);
    g_callables.erase(it);
  }
}  // c's last reference may drop here; its destructor takes the GIL (held by the caller)

std::shared_ptr<PyCallable> find_callable(int64_t id) {
  std::lock_guard<std::mutex> lock(g_callables_mutex);
  auto it = g_callables.find(id);
  return it == g_callables.end() ? nullptr : it->second;
}

MapFn python_map_fn(std::shared_ptr<PyCallable> c, bool as_numpy) {
  return [c, as_numpy](Example e, const MapContext&) -> Example {
    const std::string described = e.describe();
    py::gil_scoped_acquire gil;
    try {
      // The fields the function does not return are kept: as it saw them, so an in-place
      // change it makes to a field stays (the field is its own, or a copy made here).
      py::dict in;
      for (auto& [name, t] : e.mutable_fields()) {
        const bool exclusive = t.buffer() && t.buffer().use_count() == 1;
        t = writable(std::move(t), exclusive);
        in[py::str(name)] = as_numpy ? to_numpy(t) : to_capsule(t);
      }
      py::object out = py::reinterpret_borrow<py::object>(c->fn)(in);
      if (!py::isinstance<py::dict>(out)) {
        throw Error(ErrorCode::kInvalidArgument, "python",
                    c->name + " returned " +
                        std::string(py::str(py::type::handle_of(out).attr("__name__"))) +
                        ", expected a dict {field: array}");
      }
      for (auto item : out.cast<py::dict>()) {
        std::string name = py::str(item.first);
        e.set(name, from_numpy(name, item.second));
      }
      return e;
    } catch (py::error_already_set& err) {
      std::string what = err.what();
      {
        std::lock_guard<std::mutex> lock(c->mutex);
        Py_XDECREF(c->pending);
        PyObject* value = err.value().ptr();
        // The traceback into the function, so that it shows where the function failed.
        if (err.trace() && PyExceptionInstance_Check(value))
          PyException_SetTraceback(value, err.trace().ptr());
        c->pending = Py_NewRef(value);
      }
      throw Error(ErrorCode::kInvalidArgument, "python function " + c->name, what, described);
    }
  };
}

void register_python_map_function() {
  register_map_function("python", [](SpecObject& args) -> MapFn {
    int64_t id = args.get_int("callable", std::nullopt, 1);
    bool as_numpy = args.get_bool("as_numpy", false);
    std::shared_ptr<PyCallable> c = find_callable(id);
    if (!c) {
      throw_spec_error(args.field_path("callable"),
                       "no Python callable with id " + std::to_string(id) +
                           " in this process (a spec holding a Python function cannot be "
                           "saved and built elsewhere)");
    }
    return python_map_fn(std::move(c), as_numpy);
  });
}

// ---------------------------------------------------------------- the pipeline
class PyPipeline {
 public:
  PyPipeline(std::unique_ptr<Pipeline> p, std::vector<int64_t> callable_ids, bool as_numpy)
      : pipeline_(std::move(p)), as_numpy_(as_numpy) {
    for (int64_t id : callable_ids)
      if (auto c = find_callable(id)) callables_.push_back(std::move(c));
    worker_ = std::thread([this] { work(); });
  }
  ~PyPipeline() {
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;
      stop();
    } else {
      stop();
    }
  }
  PyPipeline(const PyPipeline&) = delete;
  PyPipeline& operator=(const PyPipeline&) = delete;

  // (fields, ids, echo, epochs, addresses) or None at the end.
  py::object next() {
    if (!pipeline_ || ended_) return py::none();
    bool interrupted = false;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(mutex_);
      request_ = true;
      done_ = false;
      cv_.notify_all();
      while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; })) {
        lock.unlock();
        {
          py::gil_scoped_acquire gil;
          interrupted = PyErr_CheckSignals() != 0;  // leaves the exception set on this thread
        }
        lock.lock();
        if (interrupted) {
          pipeline_->cancel();
          cv_.wait(lock, [this] { return done_; });
          break;
        }
      }
    }
    if (interrupted) {
      {
        py::gil_scoped_release nogil;
        stop();
      }
      throw py::error_already_set();
    }
    std::optional<Example> element = std::move(result_);
    result_.reset();
    if (error_) {
      std::exception_ptr err = error_;
      error_ = nullptr;
      ended_ = true;
      for (auto& c : callables_) {
        if (PyObject* pending = c->take_pending()) {
          PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(pending)), pending);
          Py_DECREF(pending);
          throw py::error_already_set();
        }
      }
      std::rethrow_exception(err);
    }
    if (!element) {
      ended_ = true;
      return py::none();
    }
    return to_python(std::move(*element));
  }

  py::bytes save() {
    check_open("state_dict");
    return py::bytes(pipeline_->save());
  }
  void restore(const std::string& state) {
    check_open("load_state_dict");
    pipeline_->restore(state);
  }
  std::string stats_json() const {
    if (!pipeline_) return "[]";
    return pipeline_->stats().to_json().dump();
  }
  std::string tuning_json() const {
    if (!pipeline_) return "{}";
    return pipeline_->tuning().dump();
  }
  int64_t elements_returned() const { return pipeline_ ? pipeline_->elements_returned() : 0; }
  void close() {
    py::gil_scoped_release nogil;
    stop();
  }
  bool closed() const { return !pipeline_; }

 private:
  void check_open(const char* what) const {
    if (!pipeline_)
      throw Error(ErrorCode::kInvalidArgument, "pipeline",
                  std::string(what) + ": the pipeline is closed");
  }

  py::object to_python(Example e) {
    const size_t rows = e.num_rows();
    py::list ids(rows), echo(rows), epochs(rows);
    for (size_t i = 0; i < rows; ++i) {
      const RowMeta& r = e.row(i);
      ids[i] = py::int_(r.id);
      echo[i] = py::int_(r.echo);
      epochs[i] = py::int_(r.epoch);
    }
    py::dict fields, addresses;
    for (auto& [name, t] : take_fields(std::move(e))) {
      py::str key(name);
      addresses[key] = py::int_(reinterpret_cast<uintptr_t>(t.raw_data()));
      fields[key] = as_numpy_ ? to_numpy(std::move(t)) : to_capsule(std::move(t));
    }
    return py::make_tuple(fields, ids, echo, epochs, addresses);
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [this] { return request_ || stopping_; });
      if (stopping_) return;
      request_ = false;
      lock.unlock();
      std::optional<Example> r;
      std::exception_ptr err;
      try {
        r = pipeline_->next();
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      result_ = std::move(r);
      error_ = err;
      done_ = true;
      cv_.notify_all();
    }
  }

  // Without the GIL (the puller may be waiting for it inside a Python map function).
  void stop() {
    if (!pipeline_) return;
    pipeline_->cancel();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    result_.reset();
    pipeline_.reset();  // joins the pipeline's own threads
  }

  std::unique_ptr<Pipeline> pipeline_;
  bool as_numpy_ = false;
  std::vector<std::shared_ptr<PyCallable>> callables_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool request_ = false, done_ = false, stopping_ = false, ended_ = false;
  std::optional<Example> result_;
  std::exception_ptr error_;
};

std::unique_ptr<PyPipeline> build(const std::string& spec_json, const std::string& base_dir,
                                  bool fusion, std::vector<int64_t> callables, bool as_numpy) {
  nlohmann::json spec = parse_spec_text(spec_json, "<python>");
  BuildOptions o;
  o.base_dir = base_dir;
  o.map_and_batch_fusion = fusion;
  std::unique_ptr<Pipeline> p;
  {
    // Building opens files and URLs (it may wait on a server): other Python threads run.
    py::gil_scoped_release nogil;
    p = PipelineDef::from_json(spec).build(o);
  }
  return std::make_unique<PyPipeline>(std::move(p), std::move(callables), as_numpy);
}

// The spec as the C++ PipelineDef reads and writes it (canonical: defaults stay unset).
std::string canonical_spec(const std::string& spec_json) {
  return PipelineDef::from_json(parse_spec_text(spec_json, "<python>")).to_json().dump();
}

std::string advise(const std::string& stats_json, const std::string& spec_json, int64_t batches,
                   double upstream_ms, double downstream_ms) {
  nlohmann::json spec = spec_json.empty() ? nlohmann::json() : nlohmann::json::parse(spec_json);
  EchoAdvice a =
      advise_echo(nlohmann::json::parse(stats_json), spec, batches, upstream_ms, downstream_ms);
  nlohmann::json j = {{"r", a.r},
                      {"slowest_stage", a.slowest_stage},
                      {"slowest_stage_index", a.slowest_stage_index},
                      {"recommended_factor", a.recommended_factor},
                      {"placement", a.placement},
                      {"recommended_spec", a.recommended_spec},
                      {"recommendations", a.recommendations},
                      {"stages", a.stages}};
  return j.dump();
}

}  // namespace
}  // namespace dataecho::python

PYBIND11_MODULE(_core, m) {
  using namespace dataecho::python;
  namespace de = dataecho;
  m.doc() = "dataecho's C++ engine (use the `dataecho` package, not this module)";
  // CMakeLists.txt's project(VERSION): the one version of the engine, the package and
  // its wheel (setup.py reads the same line).
  m.attr("__version__") = DATAECHO_VERSION;

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
    } catch (const de::Error& e) {
      raise_python(e);
    }
  });

  register_python_map_function();

  py::class_<PyPipeline>(m, "Pipeline")
      .def("next", &PyPipeline::next)
      .def("save", &PyPipeline::save)
      .def("restore", &PyPipeline::restore)
      .def("stats_json", &PyPipeline::stats_json)
      .def("tuning_json", &PyPipeline::tuning_json)
      .def("elements_returned", &PyPipeline::elements_returned)
      .def("close", &PyPipeline::close)
      .def_property_readonly("closed", &PyPipeline::closed);
  m.def("build", &build, py::arg("spec_json"), py::arg("base_dir"), py::arg("fusion"),
        py::arg("callables"), py::arg("as_numpy"));
  m.def("canonical_spec", &canonical_spec);
  m.def("advise", &advise);
  m.def("register_callable", &register_callable);
  m.def("unregister_callable", &unregister_callable);
  m.def("copy_counters",
        [] { return py::make_tuple(g_copied_bytes.load(), g_shared_bytes.load()); });
}
