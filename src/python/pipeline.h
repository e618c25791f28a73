// The running pipeline seen from Python (src/python), and Python callables as map
// functions.
//
// - Where next() runs, and Ctrl-C. next() pulls one element per call (nothing is read
//   ahead, so save() sees the position of the last element handed out), without the GIL.
//   It runs the pipeline on the calling thread: a hand-over to another thread costs two
//   thread wake-ups per element, which on a 2-core VM took 60% of a text pipeline's time
//   (bench/text_compare.sh, 0 workers: 65-75 M tokens/s through a thread, 170-185 M on
//   the caller's). Ctrl-C still stops a next() that waits or reads for a long time: while
//   the main thread is inside next() and SIGINT's Python handler is the default one, a
//   SIGINT handler of the engine's (installed for the call, chained to Python's) wakes
//   a watcher thread, which cancels the pipeline; next() then raises KeyboardInterrupt,
//   having closed the pipeline and joined its threads. Where Python's handler is not the
//   default (the program's own, or ignored) next() runs on a puller thread of the
//   pipeline's and waits for it, waking every 50 ms to run Python's signal handlers, as
//   a program with its own handler expects; so does a next() while the engine's threads
//   are pinned (set_engine_cpus), so that the pipeline keeps to its CPUs. On a thread
//   other than the main one, Python runs no signal handler: next() runs there, inline.
// - Writable without surprises (the default). Tensors in the engine are immutable and
//   shared (echoed copies share their buffers), but torch tensors are writable:
//   x.sub_(mean) on one batch would change its echoed repeats. So a tensor is handed out
//   without a copy only when the element holds the only reference to its buffer (a batch
//   fresh from `batch`); a shared buffer (batch echo, an echoed example, a record still
//   inside its read chunk) is copied first, and the copy counted.
// - Shared buffers, opt in (`share_buffers`): a shared buffer is handed out without the
//   copy too, as a read-only numpy array or a torch tensor the caller promises not to
//   write. With `check_shared` (DATAECHO_CHECK_SHARED=1), a CRC-32C of each shared buffer
//   is taken when it is handed out and checked when the same buffer is handed out again
//   (its echo): a write in between raises an error naming the echo stages. Memory: one
//   entry (a weak reference and a checksum, about 48 bytes) per shared buffer still
//   alive.
// - Python map functions. Map function "python" looks the callable up by the id in its
//   args; it runs under the GIL, and an exception it raises is kept and re-raised in the
//   consumer, with its traceback, instead of the engine's error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dataecho/core/pipeline.h"
#include "values.h"

namespace dataecho::python {

// ---------------------------------------------------------------- Python map functions
// A Python callable registered as map function "python" ({"fn": "python", "args":
// {"callable": id, "as_numpy": bool}}). It takes a dict {field: capsule or numpy array}
// and returns a dict {field: numpy array} (the package wraps the user's function to
// convert torch tensors both ways).
struct PyCallable {
  PyObject* fn = nullptr;  // strong reference
  std::string name;
  std::mutex mutex;
  PyObject* pending = nullptr;  // the exception it raised last, not yet re-raised (strong)

  ~PyCallable();
  // With the GIL held: the exception it raised, if any (a new reference), and forgets it.
  PyObject* take_pending();
};

int64_t register_callable(py::object fn, std::string name);
void unregister_callable(int64_t id);
std::shared_ptr<PyCallable> find_callable(int64_t id);
// Registers map function "python" in the engine's registry (once, at import).
void register_python_map_function();

// ---------------------------------------------------------------- the pipeline
// Starts the thread that turns a SIGINT during next() into the pipeline's cancellation
// (once per process: at import, and again in a forked child).
void start_sigint_watcher();

struct HandOut {
  bool as_numpy = false;
  bool share_buffers = false;  // shared buffers without a copy (read-only)
  bool check_shared = false;   // checksums of shared buffers, checked at their repeat
  std::string echo_stages;     // "3:echo" (for check_shared's message)
};

class PyPipeline {
 public:
  PyPipeline(std::unique_ptr<Pipeline> p, std::vector<int64_t> callable_ids, HandOut hand_out);
  ~PyPipeline();
  PyPipeline(const PyPipeline&) = delete;
  PyPipeline& operator=(const PyPipeline&) = delete;

  // (fields, ids, echo, epochs, addresses) or None at the end.
  py::object next();
  py::bytes save();
  void restore(const std::string& state);
  py::object stats() const;   // the per-node list of PipelineStats::to_json, as dicts
  py::object tuning() const;  // Pipeline::tuning(), as a dict
  int64_t elements_returned() const { return pipeline_ ? pipeline_->elements_returned() : 0; }
  void close();
  bool closed() const { return !pipeline_; }

 private:
  void check_open(const char* what) const;
  // One element on the calling thread; false: interrupted (the Python exception is set).
  bool next_inline(bool watch_sigint, std::optional<Example>& element);
  // One element from the puller thread; false: interrupted (the Python exception is set).
  bool wait_for_element();
  void rethrow_error();
  py::object to_python(Example e);
  py::object hand_out(const std::string& name, Tensor t, const Example& e, uintptr_t& address);
  void check_shared(const std::string& name, const Tensor& t, const Example& e);
  void work();
  void stop();  // without the GIL

  std::unique_ptr<Pipeline> pipeline_;
  HandOut hand_out_;
  std::vector<std::shared_ptr<PyCallable>> callables_;
  std::thread worker_;  // the puller, started by the first next() that needs it
  std::mutex mutex_;
  std::condition_variable cv_;
  bool request_ = false, done_ = false, stopping_ = false, ended_ = false;
  std::optional<Example> result_;
  std::exception_ptr error_;
  // check_shared: the shared buffers handed out, by address.
  struct Handed {
    std::weak_ptr<const Buffer> buffer;
    uint32_t crc = 0;
  };
  std::unordered_map<const void*, Handed> handed_;
  size_t handed_at_sweep_ = 0;
};

}  // namespace dataecho::python
