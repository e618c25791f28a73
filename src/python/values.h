// Values crossing the binding (src/python): Python objects to and from JSON values (the
// options of a PipelineDef, stats, tuning, advice: dicts and lists in Python, never JSON
// text), and tensors to and from DLPack capsules and numpy arrays.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/error.h"
#include "dataecho/core/example.h"
#include "dataecho/core/tensor.h"

namespace dataecho::python {

namespace py = pybind11;

// ---------------------------------------------------------------- errors
// The module's exception types (set once at import): dataecho.Error(RuntimeError),
// SpecError(Error, ValueError), DataError(Error).
extern PyObject* g_error;
extern PyObject* g_spec_error;
extern PyObject* g_data_error;
// Sets the Python exception for a dataecho::Error (its code, stage and input as
// attributes).
void raise_python(const Error& e);

// ---------------------------------------------------------------- JSON values
// None, bool, int, float, str, a mapping with str keys, a list or tuple (and an
// os.PathLike, as its str). Anything else is a SpecError naming `path` ("$.stages[2]
// .args.size") and the type.
nlohmann::json to_json(py::handle value, const std::string& path);
py::object to_python(const nlohmann::json& value);

// ---------------------------------------------------------------- tensors
// What handing tensors to Python cost: bytes copied because a buffer was shared, and
// bytes handed over without a copy.
extern std::atomic<int64_t> g_copied_bytes;
extern std::atomic<int64_t> g_shared_bytes;

// Whether `t` is the only holder of its buffer inside `e`'s fields: more references mean
// another holder (an echo stage's copy, a sibling record in the same read chunk, another
// field).
inline bool exclusive(const Tensor& t) { return t.buffer() && t.buffer().use_count() == 1; }
// The tensor itself when `exclusive`, else a copy (counted).
Tensor writable(Tensor t, bool exclusive);

// A DLPack capsule ("dltensor") or a numpy array over the tensor's own memory, keeping it
// alive for as long as Python uses it; `read_only` marks the numpy array so.
py::object to_capsule(Tensor t);
py::object to_numpy(Tensor t, bool read_only = false);
// A numpy array (or anything numpy.asarray takes) as a tensor: uint8, bool (as uint8),
// int32, int64, float32 or float64; 0-d arrays stay scalars. Errors name `field`.
Tensor from_numpy(const std::string& field, py::handle value);

}  // namespace dataecho::python
