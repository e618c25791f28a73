#include "values.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "dataecho/spec/spec_reader.h"

namespace dataecho::python {

PyObject* g_error = nullptr;
PyObject* g_spec_error = nullptr;
PyObject* g_data_error = nullptr;
std::atomic<int64_t> g_copied_bytes{0};
std::atomic<int64_t> g_shared_bytes{0};

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

// ---------------------------------------------------------------- JSON values
namespace {

std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

nlohmann::json int_to_json(py::handle value, const std::string& path) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<int64_t>(v);
  }
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (!PyErr_Occurred()) return static_cast<uint64_t>(u);
    PyErr_Clear();
  }
  throw_spec_error(path, "the integer " + std::string(py::str(value)) + " does not fit in 64 bits");
}

}  // namespace

nlohmann::json to_json(py::handle value, const std::string& path) {
  if (value.is_none()) return nullptr;
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  if (PyLong_Check(value.ptr())) return int_to_json(value, path);
  if (PyFloat_Check(value.ptr())) return PyFloat_AsDouble(value.ptr());
  if (PyUnicode_Check(value.ptr())) return value.cast<std::string>();
  if (PyMapping_Check(value.ptr()) && !PySequence_Check(value.ptr())) {
    nlohmann::json j = nlohmann::json::object();
    py::dict d = py::dict(py::reinterpret_borrow<py::object>(value));
    for (auto item : d) {
      if (!PyUnicode_Check(item.first.ptr()))
        throw_spec_error(
            path, "a key of type " + type_name(item.first) + ": keys of options are strings");
      std::string key = item.first.cast<std::string>();
      j[key] = to_json(item.second, path + "." + key);
    }
    return j;
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    nlohmann::json j = nlohmann::json::array();
    size_t i = 0;
    for (auto item : value) j.push_back(to_json(item, path + "[" + std::to_string(i++) + "]"));
    return j;
  }
  if (py::hasattr(value, "__fspath__")) return to_json(value.attr("__fspath__")(), path);
  throw_spec_error(path, "a value of type " + type_name(value) +
                             ": expected None, bool, int, float, str, a dict or a list");
}

py::object to_python(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(value.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(value.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : value) out.append(to_python(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : value.items()) out[py::str(k)] = to_python(v);
      return out;
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return py::none();
}

// ---------------------------------------------------------------- tensors out
namespace {

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

void delete_capsule(PyObject* capsule) {
  // Consumed capsules are renamed "used_dltensor" by the consumer, which then owns them.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    m->deleter(m);
  }
}

}  // namespace

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

py::object to_numpy(Tensor t, bool read_only) {
  auto* h = new Holder{};
  h->shape = t.shape();
  py::dtype dt = np_dtype(t.dtype());
  h->tensor = std::move(t);  // first: a small tensor's data lives inside the Tensor
  const void* data = h->tensor.raw_data();
  py::capsule base(h, [](void* p) { delete static_cast<Holder*>(p); });
  py::array a(dt, h->shape, {}, data, base);
  if (read_only) a.attr("setflags")(py::arg("write") = false);
  return a;
}

// ---------------------------------------------------------------- tensors in
namespace {

std::optional<DType> dtype_of(const py::array& a) {
  if (a.dtype().is(py::dtype::of<uint8_t>()) || a.dtype().is(py::dtype::of<bool>()))
    return DType::kUInt8;
  if (a.dtype().is(py::dtype::of<int32_t>())) return DType::kInt32;
  if (a.dtype().is(py::dtype::of<int64_t>())) return DType::kInt64;
  if (a.dtype().is(py::dtype::of<float>())) return DType::kFloat32;
  if (a.dtype().is(py::dtype::of<double>())) return DType::kFloat64;
  return std::nullopt;
}

Tensor scalar_of(DType dt, const void* p) {
  switch (dt) {
    case DType::kUInt8:
      return Tensor::scalar(*static_cast<const uint8_t*>(p));
    case DType::kInt32:
      return Tensor::scalar(*static_cast<const int32_t*>(p));
    case DType::kInt64:
      return Tensor::scalar(*static_cast<const int64_t*>(p));
    case DType::kFloat32:
      return Tensor::scalar(*static_cast<const float*>(p));
    case DType::kFloat64:
      return Tensor::scalar(*static_cast<const double*>(p));
  }
  return Tensor::scalar(*static_cast<const uint8_t*>(p));
}

}  // namespace

Tensor from_numpy(const std::string& field, py::handle value) {
  py::array a = py::array::ensure(value, py::array::c_style);
  if (!a) {
    PyErr_Clear();
    throw Error(
        ErrorCode::kInvalidArgument, "python",
        "field \"" + field + "\": expected a numpy array or torch tensor, got " + type_name(value));
  }
  const std::optional<DType> dt = dtype_of(a);
  if (!dt) {
    throw Error(ErrorCode::kInvalidArgument, "python",
                "field \"" + field + "\": dtype " + std::string(py::str(a.dtype())) +
                    " is not one of uint8, bool, int32, int64, float32, float64");
  }
  if (a.ndim() == 0) return scalar_of(*dt, a.data());
  Shape shape(a.shape(), a.shape() + a.ndim());
  return Tensor::from_data(*dt, std::move(shape), a.data(), static_cast<size_t>(a.nbytes()));
}

}  // namespace dataecho::python
