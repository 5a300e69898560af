// memplan as a Python module (pybind11): the in-process planner a build
// pipeline written in Python calls directly, through the same engine as the
// CLI and the server, so every plan is verified and limited the same way.
//
//   import memplan
//   plan = memplan.plan_buffers([("a", 0, 2, 32), ("b", 1, 3, 28)])
//   plan.arena, plan.lower_bound, plan.offsets["b"]
//   plan = memplan.plan_file("model.onnx", dims={"batch": 1})
//   response_json = memplan.plan_json(request_json)
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#if defined(__GLIBCXX__)
#include <cxxabi.h>  // abi::__forced_unwind
#endif
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/text.h"
#include "engine/model_import.h"
#include "engine/plan.h"
#include "formats/file_io.h"
#include "formats/format.h"
#include "formats/request_json.h"
#include "memplan/version.h"

namespace py = pybind11;

namespace memplan::python {
namespace {

// A failed status as the Python exception a caller would expect.
[[noreturn]] void Raise(const absl::Status& s) {
  // Python decodes the message as UTF-8: the text rule applies (and a
  // message quoting a long name is cut).
  std::string message = base::BoundedMessage(s.message());
  // The model import names the CLI's flags ("set it with --dim ...").
  if (absl::StrContains(message, "--dim") ||
      absl::StrContains(message, "--input")) {
    absl::StrAppend(&message,
                    " (in Python: --dim NAME=N is dims={NAME: N}, --input "
                    "NAME=AxB is shapes={NAME: [A, B]})");
  }
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      throw py::value_error(message);
    case absl::StatusCode::kNotFound: {
      // A file that cannot be opened: the OSError subclass of its errno.
      PyObject* type = PyExc_FileNotFoundError;
      if (auto e = s.GetPayload(formats::kErrnoPayload); e.has_value()) {
        int error = 0;
        if (absl::SimpleAtoi(std::string(*e), &error) &&
            (error == EACCES || error == EPERM)) {
          type = PyExc_PermissionError;
        }
      }
      PyErr_SetString(type, message.c_str());
      throw py::error_already_set();
    }
    case absl::StatusCode::kResourceExhausted:
      PyErr_SetString(PyExc_MemoryError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kDeadlineExceeded:
      PyErr_SetString(PyExc_TimeoutError, message.c_str());
      throw py::error_already_set();
    default:
      throw std::runtime_error(message);
  }
}

// The options every entry point takes, as keyword arguments: those given
// (not None) replace the request's own (a JSON request file's options).
struct Options {
  std::optional<std::string> strategy;
  std::optional<bool> optimize;
  std::optional<int64_t> time_budget_ms;
  std::optional<int64_t> effort;
  std::optional<int64_t> capacity;
  std::optional<int64_t> alignment;
  std::optional<std::string> weights;
  std::optional<std::string> io;
};

void Apply(const Options& o, v1::PlanOptions* out) {
  if (o.strategy.has_value()) out->set_strategy(*o.strategy);
  if (o.optimize.has_value()) out->set_optimize(*o.optimize);
  if (o.time_budget_ms.has_value()) out->set_time_budget_ms(*o.time_budget_ms);
  if (o.effort.has_value()) out->set_effort(*o.effort);
  if (o.capacity.has_value()) out->set_capacity(*o.capacity);
  if (o.alignment.has_value()) out->set_alignment(*o.alignment);
  if (o.weights.has_value()) out->set_weights(*o.weights);
  if (o.io.has_value()) out->set_io(*o.io);
}

// Takes the GIL back (after PyEval_SaveThread). While the interpreter
// finishes (the main thread returned, daemon threads still planning),
// CPython 3.11-3.13 end a thread taking the GIL by unwinding it
// (pthread_exit); the destructors on the way out, pybind11's dispatcher's
// among them, would free Python objects without the GIL: a fatal error
// ("PyThreadState_Get: ... the GIL is released"), the process aborted.
// Such a thread runs `stop` (the plan stopped and joined) and waits here
// for the process to end instead, as CPython 3.14 makes it wait. The
// unwinding is libstdc++'s abi::__forced_unwind (pthread_cancel's too,
// which nothing here uses); its handler never ends, since leaving it
// without rethrowing would abort the process: an exception from `stop`
// is dropped.
void TakeGil(PyThreadState* python,
             const std::function<void()>& stop = nullptr) {
#if defined(__GLIBCXX__)
  try {
    PyEval_RestoreThread(python);
  } catch (abi::__forced_unwind&) {
    try {
      if (stop) stop();
    } catch (...) {
    }
    for (;;) pause();
  }
#else
  PyEval_RestoreThread(python);
#endif
}

// A plan as Python sees it: the figures, offsets by name, and the whole
// response as JSON for anything else.
struct Plan {
  v1::PlanResponse response;

  int64_t arena() const { return response.arena_size_bytes(); }
  int64_t lower_bound() const { return response.lower_bound_bytes(); }
  int64_t weights_bytes() const { return response.weights_bytes(); }
  double efficiency() const { return response.efficiency(); }
  std::string strategy() const { return response.strategy(); }
  bool proven_optimal() const { return response.proven_optimal(); }
  bool time_limited() const { return response.time_limited(); }
  std::map<std::string, int64_t> offsets() const {
    std::map<std::string, int64_t> out;
    for (const v1::Assignment& a : response.assignments()) {
      out[a.name()] = a.offset();
    }
    return out;
  }
  std::vector<py::dict> assignments() const {
    std::vector<py::dict> out;
    for (const v1::Assignment& a : response.assignments()) {
      py::dict d;
      d["name"] = a.name();
      d["offset"] = a.offset();
      d["size"] = a.size();
      d["kind"] = a.kind();
      d["start"] = a.first_step();
      d["end"] = a.end_step();
      out.push_back(std::move(d));
    }
    return out;
  }
  std::string json() const {
    // Seconds for 100k tensors: without the GIL (given up and taken back
    // by calls, as in Run).
    PyThreadState* python = PyEval_SaveThread();
    std::string out;
    try {
      out = formats::ToJson(response);
    } catch (...) {
      TakeGil(python);
      throw;
    }
    TakeGil(python);
    return out;
  }
};

// Makes the request (`make`: parsing, reading a file) and plans it with
// the GIL released, on a thread of its own, while this one looks for a
// signal every 50 ms: Ctrl-C cancels the plan and raises KeyboardInterrupt
// at once, not when the budget ends (the handler of a signal runs only on
// Python's main thread, holding the GIL). `make` must not touch Python.
// With `json`, the response as JSON is made there too.
Plan Run(const std::function<absl::StatusOr<v1::PlanRequest>()>& make,
         std::string* json = nullptr) {
  absl::StatusOr<v1::PlanResponse> response;
  base::CancelToken cancel;
  absl::Notification done;
  std::exception_ptr thrown;
  bool interrupted = false;
  // The GIL is given up and taken back by calls (TakeGil), not a guard's
  // destructor: see TakeGil for a daemon thread while the interpreter
  // finishes.
  PyThreadState* python = PyEval_SaveThread();
  std::optional<std::thread> planner;
  try {
    planner.emplace([&] {
      // Whatever it throws (std::bad_alloc) is rethrown on the calling
      // thread, where pybind11 makes it a Python exception: escaping a
      // std::thread it would end the process.
      try {
        absl::StatusOr<v1::PlanRequest> request = make();
        response = request.ok()
                       ? engine::PlanToResponse(*request, engine::Limits{},
                                                nullptr, &cancel)
                       : absl::StatusOr<v1::PlanResponse>(request.status());
        if (response.ok() && json != nullptr && !cancel.Cancelled()) {
          *json = formats::ToJson(*response);
        }
      } catch (...) {
        thrown = std::current_exception();
      }
      done.Notify();
    });
  } catch (...) {
    TakeGil(python);
    throw;
  }
  // However Run ends (an exception included), the planner is stopped and
  // joined first: a std::thread destroyed joinable ends the process.
  const auto stop = [&] {
    if (planner->joinable()) {
      cancel.Cancel();
      planner->join();  // a cancelled plan ends within the planner's poll
    }
  };
  absl::Cleanup join = stop;
  while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
    TakeGil(python, stop);
    const bool signalled = PyErr_CheckSignals() != 0;  // the handler raised
    python = PyEval_SaveThread();
    if (signalled) {
      interrupted = true;
      cancel.Cancel();
      break;
    }
  }
  planner->join();
  TakeGil(python);
  if (interrupted) throw py::error_already_set();
  if (thrown) std::rethrow_exception(thrown);
  if (!response.ok()) Raise(response.status());
  return Plan{*std::move(response)};
}

// An int argument as Python means it: anything with __index__ (int,
// numpy's integers), but not bool (an int subclass) nor a float or str (a
// TypeError); a value past 64 bits an OverflowError; both naming `what`.
int64_t IntArg(const py::handle& h, const std::string& what) {
  if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr())) {
    throw py::type_error(absl::StrCat(
        what, " must be an int, not ",
        std::string(py::str(py::type::handle_of(h).attr("__name__")))));
  }
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    PyErr_Clear();
    PyErr_SetString(PyExc_OverflowError,
                    absl::StrCat(what, " does not fit in 64 bits").c_str());
    throw py::error_already_set();
  }
  return v;
}

// A buffer's name: a str as it is, bytes as they are (the text rule then
// escapes what is not UTF-8), anything else a TypeError.
std::string NameArg(const py::handle& h) {
  if (py::isinstance<py::str>(h)) {
    // A str that is not Unicode text (a lone surrogate, as os.fsdecode
    // makes of a non-UTF-8 byte) raises UnicodeEncodeError, a ValueError.
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
    if (utf8 == nullptr) throw py::error_already_set();
    return std::string(utf8, static_cast<size_t>(size));
  }
  if (py::isinstance<py::bytes>(h)) return py::cast<std::string>(h);
  throw py::type_error(absl::StrCat(
      "a buffer's name must be a str or bytes, not ",
      std::string(py::str(py::type::handle_of(h).attr("__name__")))));
}

// One buffer from a tuple (name, start, end, size[, alignment]) or a dict
// with those keys (and optionally fixed_offset). Without its own alignment
// a buffer gets `alignment` (none: the request's, the alignment= option).
void AddBuffer(const py::handle& item, std::optional<int64_t> alignment,
               v1::PlanRequest* request) {
  v1::Buffer* b = request->add_buffers();
  if (py::isinstance<py::dict>(item)) {
    py::dict d = py::reinterpret_borrow<py::dict>(item);
    for (const auto& [key, value] : d) {
      // (A str key that is not text, a lone surrogate, is unknown too.)
      Py_ssize_t size = 0;
      const char* text = py::isinstance<py::str>(key)
                             ? PyUnicode_AsUTF8AndSize(key.ptr(), &size)
                             : nullptr;
      if (text == nullptr) PyErr_Clear();
      const bool known =
          text != nullptr &&
          std::set<std::string>{"name", "start",     "end",
                                "size", "alignment", "fixed_offset"}
                  .count(std::string(text, static_cast<size_t>(size))) > 0;
      if (!known) {
        throw py::value_error(absl::StrCat(
            "a buffer dict has the key ",
            base::BoundedMessage(std::string(py::repr(key)), 64),
            "; it takes 'name', 'start', 'end', 'size', 'alignment' and "
            "'fixed_offset'"));
      }
    }
    for (const char* key : {"name", "start", "end", "size"}) {
      if (!d.contains(key)) {
        throw py::value_error(absl::StrCat(
            "a buffer dict needs 'name', 'start', 'end' and 'size'; this one "
            "has no '",
            key, "'"));
      }
    }
    b->set_id(NameArg(d["name"]));
    b->set_start(IntArg(d["start"], "a buffer's start"));
    b->set_end(IntArg(d["end"], "a buffer's end"));
    b->set_size(IntArg(d["size"], "a buffer's size"));
    if (d.contains("alignment")) {
      alignment = IntArg(d["alignment"], "a buffer's alignment");
    }
    if (alignment.has_value()) b->set_alignment(*alignment);
    if (d.contains("fixed_offset")) {
      b->set_fixed_offset(IntArg(d["fixed_offset"], "a buffer's fixed_offset"));
    }
    return;
  }
  if (!py::isinstance<py::tuple>(item) && !py::isinstance<py::list>(item)) {
    throw py::type_error(
        "a buffer is a (name, start, end, size[, alignment]) tuple or a dict");
  }
  py::sequence t = py::reinterpret_borrow<py::sequence>(item);
  if (t.size() < 4 || t.size() > 5) {
    throw py::value_error(
        "a buffer is (name, start, end, size[, alignment]) or a dict");
  }
  b->set_id(NameArg(t[0]));
  b->set_start(IntArg(t[1], "a buffer's start"));
  b->set_end(IntArg(t[2], "a buffer's end"));
  b->set_size(IntArg(t[3], "a buffer's size"));
  if (t.size() == 5) alignment = IntArg(t[4], "a buffer's alignment");
  if (alignment.has_value()) b->set_alignment(*alignment);
}

Plan PlanBuffers(const py::iterable& buffers, const Options& options) {
  v1::PlanRequest request;
  // A buffer without its own alignment takes the alignment= option, else
  // 1, as a CSV without an alignment column (the CLI's default of 64 is
  // for graphs and JSON buffer lists).
  const std::optional<int64_t> alignment =
      options.alignment.has_value() ? std::nullopt : std::optional<int64_t>(1);
  for (const py::handle& item : buffers) AddBuffer(item, alignment, &request);
  Apply(options, request.mutable_options());
  request.set_no_timings(true);
  return Run(
      [&]() -> absl::StatusOr<v1::PlanRequest> { return std::move(request); });
}

// A graph given as the JSON contract's dict (tensors, ops, inputs, outputs),
// or a whole request's.
Plan PlanGraph(const py::dict& graph, const Options& options) {
  py::module_ json = py::module_::import("json");
  const std::string text = py::str(json.attr("dumps")(graph));
  return Run([&]() -> absl::StatusOr<v1::PlanRequest> {
    absl::StatusOr<v1::PlanRequest> request =
        formats::ParseRequestJson(text, "graph");
    if (!request.ok()) return request;
    Apply(options, request->mutable_options());
    request->set_no_timings(true);
    return request;
  });
}

// Any file `memplan plan` reads (JSON, CSV, ONNX, TFLite) as a request:
// with the GIL released (a model of 2 GiB takes a while).
absl::StatusOr<v1::PlanRequest> FileRequest(
    const std::string& path, const std::map<std::string, int64_t>& dims,
    const std::map<std::string, std::vector<int64_t>>& shapes,
    const Options& options) {
  // Mapped: a model's weights are never read (RequestModelBytes skips them).
  absl::StatusOr<formats::FileBytes> file = formats::FileBytes::Open(
      path, formats::kDefaultMaxInputBytes, formats::kMaxMappedBytes);
  if (!file.ok()) return file.status();
  const absl::string_view bytes = file->view();
  absl::StatusOr<formats::Format> format =
      formats::DetectFormat(path, bytes, "");
  if (!format.ok()) return format.status();
  if (!formats::IsModel(*format) &&
      static_cast<int64_t>(bytes.size()) > formats::kDefaultMaxInputBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, " is larger than ", formats::kDefaultMaxInputBytes, " bytes"));
  }
  v1::PlanRequest request;
  if (formats::IsModel(*format)) {
    absl::StatusOr<std::string> lean =
        engine::RequestModelBytes(*format, *file, path);
    if (!lean.ok()) return lean.status();
    v1::ModelFile* model = request.mutable_model();
    model->set_format(std::string(formats::FormatName(*format)));
    model->set_name(path);
    model->set_data(*std::move(lean));
    for (const auto& [name, value] : dims)
      (*model->mutable_dims())[name] = value;
    for (const auto& [name, dims_of] : shapes) {
      for (int64_t d : dims_of) (*model->mutable_shapes())[name].add_dims(d);
    }
  } else if (*format == formats::Format::kJson) {
    absl::StatusOr<v1::PlanRequest> parsed =
        formats::ParseRequestJson(bytes, path);
    if (!parsed.ok()) return parsed.status();
    request = *std::move(parsed);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": use plan_buffers for CSV data"));
  }
  Apply(options, request.mutable_options());
  request.set_no_timings(true);
  return request;
}

// The whole contract: a PlanRequest as JSON in, the PlanResponse as JSON out.
std::string PlanJson(const std::string& request_json) {
  std::string json;
  Run([&] { return formats::ParseRequestJson(request_json, "request"); },
      &json);
  return json;
}

// An int option: None (not given) or an int as IntArg takes it.
std::optional<int64_t> IntOption(const py::object& h, const char* name) {
  if (h.is_none()) return std::nullopt;
  return IntArg(h, name);
}

// The keyword options as given.
Options OptionsOf(const std::optional<std::string>& strategy,
                  std::optional<bool> optimize,
                  const py::object& time_budget_ms, const py::object& effort,
                  const py::object& capacity, const py::object& alignment,
                  const std::optional<std::string>& weights,
                  const std::optional<std::string>& io) {
  return Options{strategy,
                 optimize,
                 IntOption(time_budget_ms, "time_budget_ms"),
                 IntOption(effort, "effort"),
                 IntOption(capacity, "capacity"),
                 IntOption(alignment, "alignment"),
                 weights,
                 io};
}

}  // namespace
}  // namespace memplan::python

PYBIND11_MODULE(memplan, m) {
  using memplan::python::Options;
  using memplan::python::Plan;
  m.doc() =
      "memplan: static memory plans for ML computation graphs (one arena, an "
      "offset per tensor, the lower bound, a verified plan).";
  m.attr("__version__") = MEMPLAN_VERSION;
  py::class_<Plan>(m, "Plan", "A verified plan.")
      .def_property_readonly("arena", &Plan::arena, "arena size in bytes")
      .def_property_readonly("lower_bound", &Plan::lower_bound,
                             "no plan is smaller (alignment padding counted)")
      .def_property_readonly("weights_bytes", &Plan::weights_bytes,
                             "weights and constants kept out of the arena")
      .def_property_readonly("efficiency", &Plan::efficiency,
                             "arena / lower bound (1.0 is optimal)")
      .def_property_readonly("strategy", &Plan::strategy)
      .def_property_readonly("proven_optimal", &Plan::proven_optimal)
      .def_property_readonly("time_limited", &Plan::time_limited,
                             "the time budget cut the search: another "
                             "machine may plan differently (set effort)")
      .def_property_readonly("offsets", &Plan::offsets,
                             "planned tensor name -> offset in the arena")
      .def_property_readonly("assignments", &Plan::assignments,
                             "planned tensors: name, offset, size, kind, "
                             "start, end (half-open steps)")
      .def("json", &Plan::json, "the whole PlanResponse as JSON");
#define MEMPLAN_OPTION_ARGS                                               \
  py::arg("strategy") = py::none(), py::arg("optimize") = py::none(),     \
  py::arg("time_budget_ms") = py::none(), py::arg("effort") = py::none(), \
  py::arg("capacity") = py::none(), py::arg("alignment") = py::none(),    \
  py::arg("weights") = py::none(), py::arg("io") = py::none()
#define MEMPLAN_OPTION_PARAMS                                              \
  const std::optional<std::string>&strategy, std::optional<bool> optimize, \
      const py::object &time_budget_ms, const py::object &effort,          \
      const py::object &capacity, const py::object &alignment,             \
      const std::optional<std::string>&weights,                            \
      const std::optional<std::string>&io
#define MEMPLAN_OPTIONS                                                  \
  memplan::python::OptionsOf(strategy, optimize, time_budget_ms, effort, \
                             capacity, alignment, weights, io)
  m.def(
      "plan_buffers",
      [](const py::iterable& buffers, MEMPLAN_OPTION_PARAMS) {
        return memplan::python::PlanBuffers(buffers, MEMPLAN_OPTIONS);
      },
      "Plans buffers given as (name, start, end, size[, alignment]) tuples "
      "or dicts; lifetimes are half-open [start, end). A buffer without its "
      "own alignment takes the alignment option, else 1.",
      py::arg("buffers"), py::kw_only(), MEMPLAN_OPTION_ARGS);
  m.def(
      "plan_graph",
      [](const py::dict& graph, MEMPLAN_OPTION_PARAMS) {
        return memplan::python::PlanGraph(graph, MEMPLAN_OPTIONS);
      },
      "Plans a graph given as the JSON contract's dict: tensors (name, "
      "size_bytes), ops (name, inputs, outputs) in execution order, inputs, "
      "outputs; or a whole request's dict (its options, where no keyword "
      "gives them).",
      py::arg("graph"), py::kw_only(), MEMPLAN_OPTION_ARGS);
  m.def(
      "plan_file",
      [](const py::object& path_like,
         const std::map<std::string, int64_t>& dims,
         const std::map<std::string, std::vector<int64_t>>& shapes,
         MEMPLAN_OPTION_PARAMS) {
        // A str, bytes or os.PathLike (pathlib.Path), as open() takes: the
        // file system's bytes (os.fsencode: a name that is not UTF-8 too).
        const std::string path = py::cast<std::string>(
            py::module_::import("os").attr("fsencode")(path_like));
        if (path.find('\0') != std::string::npos) {
          throw py::value_error("embedded null byte");  // as open() says
        }
        const memplan::python::Options options = MEMPLAN_OPTIONS;
        return memplan::python::Run([&] {
          return memplan::python::FileRequest(path, dims, shapes, options);
        });
      },
      "Plans a file: a JSON request or graph, an ONNX or TFLite model "
      "(dims: symbolic dim values; shapes: whole input shapes). Options "
      "given replace the request file's own.",
      py::arg("path"), py::kw_only(),
      py::arg("dims") = std::map<std::string, int64_t>{},
      py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{},
      MEMPLAN_OPTION_ARGS);
#undef MEMPLAN_OPTIONS
#undef MEMPLAN_OPTION_PARAMS
#undef MEMPLAN_OPTION_ARGS
  m.def("plan_json", &memplan::python::PlanJson,
        "A memplan.v1.PlanRequest as JSON in, the PlanResponse as JSON out.",
        py::arg("request_json"));
}
