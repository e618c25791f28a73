#include "pipeline.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <new>
#include <utility>

#include "dataecho/core/cpu_affinity.h"
#include "dataecho/formats/crc32c.h"
#include "dataecho/spec/registry.h"
#include "dataecho/spec/spec_reader.h"

namespace dataecho::python {

// ---------------------------------------------------------------- Python map functions
PyCallable::~PyCallable() {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  Py_XDECREF(fn);
  Py_XDECREF(pending);
}

PyObject* PyCallable::take_pending() {
  std::lock_guard<std::mutex> lock(mutex);
  PyObject* p = pending;
  pending = nullptr;
  return p;
}

namespace {

std::mutex g_callables_mutex;
std::map<int64_t, std::shared_ptr<PyCallable>> g_callables;
int64_t g_next_callable = 1;

// Runs the callable on the example's fields, under the GIL.
Example call_python(PyCallable& c, Example e, bool as_numpy) {
  // The fields the function does not return are kept: as it saw them, so an in-place
  // change it makes to a field stays (the field is its own, or a copy made here).
  py::dict in;
  for (auto& [name, t] : e.mutable_fields()) {
    t = writable(std::move(t), exclusive(t));
    in[py::str(name)] = as_numpy ? to_numpy(t) : to_capsule(t);
  }
  py::object out = py::reinterpret_borrow<py::object>(c.fn)(in);
  if (!py::isinstance<py::dict>(out)) {
    throw Error(ErrorCode::kInvalidArgument, "python",
                c.name + " returned " +
                    std::string(py::str(py::type::handle_of(out).attr("__name__"))) +
                    ", expected a dict {field: array}");
  }
  for (auto item : out.cast<py::dict>()) {
    std::string name = py::str(item.first);
    e.set(name, from_numpy(name, item.second));
  }
  return e;
}

MapFn python_map_fn(std::shared_ptr<PyCallable> c, bool as_numpy) {
  return [c, as_numpy](Example e, const MapContext&) -> Example {
    const std::string described = e.describe();
    py::gil_scoped_acquire gil;
    try {
      return call_python(*c, std::move(e), as_numpy);
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

}  // namespace

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

// ---------------------------------------------------------------- Ctrl-C, inline
namespace {

// The watcher: a thread blocked reading a pipe, one per process. The engine's SIGINT
// handler (installed only for the length of a watched next()) writes a byte to the pipe
// and calls Python's handler; the watcher cancels the pipeline inside that next().
struct SigintWatch {
  std::mutex mutex;
  Pipeline* current = nullptr;  // the pipeline inside a watched next(), if any
  bool interrupted = false;     // a SIGINT came while it was
  pid_t pid = 0;                // the process the watcher runs in (a fork starts its own)
};
SigintWatch g_watch;
std::atomic<int> g_sigint_write{-1};  // the pipe's write end (non-blocking)
struct sigaction g_python_sigint;     // the handler to chain to: Python's

extern "C" void on_sigint(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  if (const int fd = g_sigint_write.load(std::memory_order_relaxed); fd >= 0) {
    const char byte = 1;
    [[maybe_unused]] ssize_t written = ::write(fd, &byte, 1);
  }
  errno = saved;
  if (g_python_sigint.sa_flags & SA_SIGINFO) {
    g_python_sigint.sa_sigaction(sig, info, context);
  } else if (g_python_sigint.sa_handler != SIG_DFL && g_python_sigint.sa_handler != SIG_IGN) {
    g_python_sigint.sa_handler(sig);
  }
}

void watch_sigint(int read_fd) {
  char bytes[64];
  for (;;) {
    const ssize_t got = ::read(read_fd, bytes, sizeof(bytes));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;
    std::lock_guard<std::mutex> lock(g_watch.mutex);
    if (g_watch.current != nullptr) {
      g_watch.interrupted = true;
      g_watch.current->cancel();
    }
  }
}

// Python's `signal` module objects next() asks (leaked: they live as long as the process).
struct PythonSignals {
  py::object getsignal, default_handler, sigint;
  unsigned long main_thread = 0;
};
const PythonSignals& python_signals() {
  static const PythonSignals* s = [] {
    auto* p = new PythonSignals;
    py::module_ signal = py::module_::import("signal");
    p->getsignal = signal.attr("getsignal");
    p->default_handler = signal.attr("default_int_handler");
    p->sigint = signal.attr("SIGINT");
    p->main_thread =
        py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
    return p;
  }();
  return *s;
}

}  // namespace

void start_sigint_watcher() {
  if (g_watch.pid == ::getpid()) return;
  // A forked child has no watcher thread (and the parent's lock state): it starts afresh.
  new (&g_watch.mutex) std::mutex;
  g_watch.current = nullptr;
  g_watch.interrupted = false;
  if (const int old = g_sigint_write.exchange(-1); old >= 0) ::close(old);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(ErrorCode::kInternal, "pipeline", "cannot make the Ctrl-C pipe");
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  std::thread(watch_sigint, fds[0]).detach();
  g_sigint_write.store(fds[1]);
  g_watch.pid = ::getpid();
}

// ---------------------------------------------------------------- the pipeline
PyPipeline::PyPipeline(std::unique_ptr<Pipeline> p, std::vector<int64_t> callable_ids,
                       HandOut hand_out)
    : pipeline_(std::move(p)), hand_out_(std::move(hand_out)) {
  for (int64_t id : callable_ids)
    if (auto c = find_callable(id)) callables_.push_back(std::move(c));
}

PyPipeline::~PyPipeline() {
  if (PyGILState_Check()) {
    py::gil_scoped_release nogil;
    stop();
  } else {
    stop();
  }
}

bool PyPipeline::next_inline(bool watch_sigint, std::optional<Example>& element) {
  // A next() inside a watched one (a Python map function of the outer pipeline iterating
  // another on the main thread) runs unwatched: the outer watch covers it, and installing
  // the handler again would chain it to itself.
  static bool watching = false;  // read and written with the GIL held
  watch_sigint = watch_sigint && !watching;
  struct sigaction ours = {}, seen = {};
  if (watch_sigint) {
    watching = true;
    start_sigint_watcher();
    ::sigaction(SIGINT, nullptr, &g_python_sigint);
    ours = g_python_sigint;
    ours.sa_flags = (g_python_sigint.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
    ours.sa_sigaction = on_sigint;
    std::lock_guard<std::mutex> lock(g_watch.mutex);
    g_watch.current = pipeline_.get();
    g_watch.interrupted = false;
  }
  {
    py::gil_scoped_release nogil;
    if (watch_sigint) ::sigaction(SIGINT, &ours, nullptr);
    try {
      element = pipeline_->next();
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  if (!watch_sigint) return true;
  watching = false;
  // Python's handler back, unless the call replaced ours (a Python map function's
  // signal.signal()): that one stays.
  ::sigaction(SIGINT, &g_python_sigint, &seen);
  if (!(seen.sa_flags & SA_SIGINFO) || seen.sa_sigaction != on_sigint)
    ::sigaction(SIGINT, &seen, nullptr);
  bool interrupted = false;
  {
    std::lock_guard<std::mutex> lock(g_watch.mutex);
    g_watch.current = nullptr;
    interrupted = g_watch.interrupted;
  }
  if (!interrupted) return true;
  // Python's handler saw the SIGINT too: it raises KeyboardInterrupt here.
  element.reset();
  error_ = nullptr;
  if (PyErr_CheckSignals() == 0) PyErr_SetNone(PyExc_KeyboardInterrupt);
  py::gil_scoped_release nogil;
  stop();
  return false;
}

bool PyPipeline::wait_for_element() {
  if (!worker_.joinable()) worker_ = start_engine_thread([this] { work(); });
  py::gil_scoped_release nogil;
  std::unique_lock<std::mutex> lock(mutex_);
  request_ = true;
  done_ = false;
  cv_.notify_all();
  while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; })) {
    lock.unlock();
    bool interrupted = false;
    {
      py::gil_scoped_acquire gil;
      interrupted = PyErr_CheckSignals() != 0;  // leaves the exception set on this thread
    }
    lock.lock();
    if (interrupted) {
      pipeline_->cancel();
      cv_.wait(lock, [this] { return done_; });
      lock.unlock();
      stop();
      return false;
    }
  }
  return true;
}

void PyPipeline::rethrow_error() {
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

py::object PyPipeline::next() {
  if (!pipeline_ || ended_) return py::none();
  // Where it runs (pipeline.h): inline unless a program's own SIGINT handler must run
  // while it waits, or the engine's threads are pinned.
  const PythonSignals& signals = python_signals();
  const bool main_thread = PyThread_get_thread_ident() == signals.main_thread;
  const bool default_sigint =
      main_thread && signals.getsignal(signals.sigint).is(signals.default_handler);
  std::optional<Example> element;
  if (engine_cpus().empty() && (!main_thread || default_sigint)) {
    if (!next_inline(main_thread, element)) throw py::error_already_set();
  } else {
    if (!wait_for_element()) throw py::error_already_set();
    element = std::move(result_);
    result_.reset();
  }
  if (error_) rethrow_error();
  if (!element) {
    ended_ = true;
    return py::none();
  }
  return to_python(std::move(*element));
}

py::bytes PyPipeline::save() {
  check_open("state_dict");
  return py::bytes(pipeline_->save());
}

void PyPipeline::restore(const std::string& state) {
  check_open("load_state_dict");
  pipeline_->restore(state);
  handed_.clear();
}

py::object PyPipeline::stats() const {
  if (!pipeline_) return py::list();
  return python::to_python(pipeline_->stats().to_json());
}

py::object PyPipeline::tuning() const {
  if (!pipeline_) return py::dict();
  return python::to_python(pipeline_->tuning());
}

void PyPipeline::close() {
  py::gil_scoped_release nogil;
  stop();
}

void PyPipeline::check_open(const char* what) const {
  if (!pipeline_)
    throw Error(ErrorCode::kInvalidArgument, "pipeline",
                std::string(what) + ": the pipeline is closed");
}

py::object PyPipeline::to_python(Example e) {
  const size_t rows = e.num_rows();
  py::list ids(rows), echo(rows), epochs(rows);
  for (size_t i = 0; i < rows; ++i) {
    const RowMeta& r = e.row(i);
    ids[i] = py::int_(r.id);
    echo[i] = py::int_(r.echo);
    epochs[i] = py::int_(r.epoch);
  }
  py::dict fields, addresses;
  // Taken out of the element first: its own reference would make every buffer shared.
  std::vector<Example::Field> taken = std::move(e.mutable_fields());
  e.mutable_fields().clear();
  for (auto& [name, t] : taken) {
    py::str key(name);
    uintptr_t address = 0;
    fields[key] = hand_out(name, std::move(t), e, address);
    addresses[key] = py::int_(address);
  }
  return py::make_tuple(fields, ids, echo, epochs, addresses);
}

// One field to Python: without a copy when its buffer is the element's alone, or shared
// and the caller opted in (read-only); else a copy.
py::object PyPipeline::hand_out(const std::string& name, Tensor t, const Example& e,
                                uintptr_t& address) {
  const bool own = exclusive(t);
  const bool share = !own && t.buffer() && hand_out_.share_buffers;
  if (share) {
    if (hand_out_.check_shared) check_shared(name, t, e);
    g_shared_bytes += static_cast<int64_t>(t.nbytes());
  } else {
    t = writable(std::move(t), own);
  }
  address = reinterpret_cast<uintptr_t>(t.raw_data());
  return hand_out_.as_numpy ? to_numpy(std::move(t), share) : to_capsule(std::move(t));
}

void PyPipeline::check_shared(const std::string& name, const Tensor& t, const Example& e) {
  const void* key = t.raw_data();
  const uint32_t crc = crc32c::value(t.raw_data(), t.nbytes());
  auto it = handed_.find(key);
  if (it != handed_.end() && it->second.buffer.lock() == t.buffer()) {
    if (it->second.crc != crc) {
      throw Error(ErrorCode::kInvalidArgument, hand_out_.echo_stages,
                  "field \"" + name +
                      "\": a buffer handed out without a copy (build(share_buffers=True)) "
                      "was written before the echo stage(s) " +
                      hand_out_.echo_stages +
                      " repeated it; copy it before writing (x.clone(), np.array(x)), or "
                      "build without share_buffers",
                  e.describe());
    }
    return;
  }
  handed_[key] = Handed{t.buffer(), crc};
  // Forget buffers nobody holds any more, each time the table has doubled.
  if (handed_.size() >= 2 * handed_at_sweep_ + 64) {
    std::erase_if(handed_, [](const auto& kv) { return kv.second.buffer.expired(); });
    handed_at_sweep_ = handed_.size();
  }
}

void PyPipeline::work() {
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

void PyPipeline::stop() {
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

}  // namespace dataecho::python
