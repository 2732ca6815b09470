// File: python/src/module.cc
// The extension module tutti._tutti: UniqueId, Work, the _Comm class's creation, queries and
// statistics, and the exception mapping. The collectives themselves are in collectives.cc.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <tuple>

#include "python/src/comm.h"

namespace tutti::py {

namespace {

Options makeOptions(long long timeoutMs, long long bootstrapTimeoutMs,
                    const std::string& transports, int checkCalls) {
  Options o;
  o.timeout = std::chrono::milliseconds(timeoutMs > 0 ? timeoutMs : 0);
  o.bootstrapTimeout = std::chrono::milliseconds(bootstrapTimeoutMs > 0 ? bootstrapTimeoutMs : 0);
  o.transports = transports;
  o.checkCalls = checkCalls;
  return o;
}

struct PyUniqueId {
  UniqueId id;
};

UniqueId newUniqueId() {
  Result<UniqueId> r = [] {
    nb::gil_scoped_release release;
    return createUniqueId();
  }();
  if (!r) raiseStatus(r.status());
  return r.value();
}

// A UniqueId whose root binds a fresh port (createFreshUniqueId): a split's sub-group leaders
// must not all bind the job's TUTTI_COMM_ID.
UniqueId freshUniqueId() {
  Result<UniqueId> r = [] {
    nb::gil_scoped_release release;
    return createFreshUniqueId();
  }();
  if (!r) raiseStatus(r.status());
  return r.value();
}

nb::bytes idBytes(const PyUniqueId& u) { return nb::bytes(u.id.bytes.data(), u.id.bytes.size()); }

PyUniqueId idFromBytes(nb::bytes b) {
  if (b.size() != sizeof(UniqueId::bytes))
    throw nb::value_error(("UniqueId.from_bytes: 'data' has " + std::to_string(b.size()) +
                           " bytes, expected " + std::to_string(sizeof(UniqueId::bytes)))
                              .c_str());
  PyUniqueId u;
  std::memcpy(u.id.bytes.data(), b.c_str(), b.size());
  return u;
}

std::optional<Coll> parseCollName(const std::string& name) {
  std::string n;
  for (char c : name)
    if (c != '_') n += c;  // "all_reduce" -> "allreduce"
  return parseColl(n);
}

}  // namespace

[[noreturn]] void raiseStatus(const Status& s) {
  nb::object exc =
      nb::module_::import_("tutti._errors")
          .attr("_make")(static_cast<int>(s.code()), std::string(codeName(s.code())), s.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

// ---- PyWork ----

PyWork::~PyWork() {
  if (works_.empty()) return;  // moved from, or nothing asynchronous
  nb::gil_scoped_release release;
  for (const Work& w : works_) (void)w.wait();  // the error stays in the communicator
}

nb::object PyWork::wait() {
  Status first;
  {
    nb::gil_scoped_release release;
    for (const Work& w : works_) {
      Status s = w.wait();
      if (first.isOk() && !s.isOk()) first = std::move(s);
    }
  }
  if (!first.isOk()) raiseStatus(first);
  return result_;
}

bool PyWork::isCompleted() const {
  for (const Work& w : works_)
    if (!w.test()) return false;
  return true;
}

nb::object PyWork::exception() const {
  if (!isCompleted()) return nb::none();
  for (const Work& w : works_) {
    Status s = w.error();
    if (!s.isOk())
      return nb::module_::import_("tutti._errors")
          .attr("_make")(static_cast<int>(s.code()), std::string(codeName(s.code())), s.message());
  }
  return nb::none();
}

// ---- PyComm ----

PyComm::~PyComm() {
  nb::gil_scoped_release release;
  comm_ = Communicator();
}

void PyComm::close() {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mu_);
  comm_ = Communicator();
}

void bindAll(nb::module_& m) {
  m.def("version", [] { return std::string(versionString()); });

  nb::class_<PyUniqueId>(m, "UniqueId",
                         "128 opaque bytes naming a rendezvous (layout-compatible with "
                         "ncclUniqueId). UniqueId() starts the rendezvous root in a background "
                         "thread of this process, which must live until every rank has joined.")
      .def("__init__", [](PyUniqueId* self) { new (self) PyUniqueId{newUniqueId()}; })
      .def_static("from_bytes", &idFromBytes, nb::arg("data"),
                  "The UniqueId whose 128 bytes are `data` (from bytes(uid) on another rank). "
                  "ValueError for any other length.")
      .def("__bytes__", &idBytes)
      .def(
          "__eq__",
          [](const PyUniqueId& a, const PyUniqueId& b) { return a.id.bytes == b.id.bytes; },
          nb::is_operator())  // another type: NotImplemented, so == falls back to identity
      .def("__hash__", [](const PyUniqueId& u) { return nb::hash(idBytes(u)); })
      .def("__getstate__", [](const PyUniqueId& u) { return idBytes(u); })
      .def("__setstate__",
           [](PyUniqueId* self, nb::bytes b) { new (self) PyUniqueId(idFromBytes(b)); })
      .def("__repr__",
           [](const PyUniqueId&) { return std::string("tutti.UniqueId(<128 bytes>)"); });
  m.def("_fresh_unique_id", [] { return PyUniqueId{freshUniqueId()}; });

  nb::class_<PyWork>(m, "Work",
                     "An asynchronous call (async_op=True). Buffers must stay untouched until it "
                     "completes; dropping the Work waits for it.")
      .def("wait", &PyWork::wait,
           "Blocks until the call completed (GIL released) and returns its result (the output "
           "array, the list of arrays of fused_all_reduce, or None). Raises the call's "
           "tutti.Error (RemoteError, TimeoutError, ...).")
      .def("result", &PyWork::wait, "Same as wait().")
      .def("is_completed", &PyWork::isCompleted,
           "True once the call finished, successfully or not. Never blocks.")
      .def("exception", &PyWork::exception,
           "The call's tutti.Error once finished with an error; None otherwise.");

  nb::class_<PyComm> cls(m, "_Comm");
  cls.def_static(
         "create",
         [](const PyUniqueId& id, int rank, int size, long long timeoutMs,
            long long bootstrapTimeoutMs, const std::string& transports, int checkCalls) {
           Options o = makeOptions(timeoutMs, bootstrapTimeoutMs, transports, checkCalls);
           Result<Communicator> r = [&] {
             nb::gil_scoped_release release;
             return Communicator::create(id.id, rank, size, o);
           }();
           if (!r) raiseStatus(r.status());
           return new PyComm(std::move(r.value()), o);
         },
         nb::arg("uid"), nb::arg("rank"), nb::arg("size"), nb::arg("timeout_ms"),
         nb::arg("bootstrap_timeout_ms"), nb::arg("transports"), nb::arg("check_calls"))
      .def_static(
          "from_env",
          [](long long timeoutMs, long long bootstrapTimeoutMs, const std::string& transports,
             int checkCalls) {
            Options o = makeOptions(timeoutMs, bootstrapTimeoutMs, transports, checkCalls);
            Result<Communicator> r = [&] {
              nb::gil_scoped_release release;
              return Communicator::fromEnvironment(o);
            }();
            if (!r) raiseStatus(r.status());
            return new PyComm(std::move(r.value()), o);
          },
          nb::arg("timeout_ms"), nb::arg("bootstrap_timeout_ms"), nb::arg("transports"),
          nb::arg("check_calls"))
      .def_prop_ro("rank", &PyComm::rank)
      .def_prop_ro("size", &PyComm::size)
      .def_prop_ro("options",
                   [](const PyComm& c) {
                     const Options& o = c.options();
                     return std::make_tuple(static_cast<long long>(o.timeout.count()),
                                            static_cast<long long>(o.bootstrapTimeout.count()),
                                            o.transports, o.checkCalls);
                   })
      .def("transport_to", [](PyComm& c, int peer) { return c.comm().transportTo(peer); })
      .def("close", &PyComm::close)
      .def("abort", [](PyComm& c) { c.comm().abort(); })
      .def("async_error",
           [](PyComm& c) -> nb::object {
             Status s = c.comm().asyncError();
             if (s.isOk()) return nb::none();
             return nb::module_::import_("tutti._errors")
                 .attr("_make")(static_cast<int>(s.code()), std::string(codeName(s.code())),
                                s.message());
           })
      .def("stats",
           [](PyComm& c) {
             std::vector<std::tuple<std::string, std::string, uint64_t, uint64_t, uint64_t, double>>
                 rows;
             for (const CollStats& s : c.comm().stats())
               rows.emplace_back(std::string(collName(s.coll)), s.algorithm, s.calls, s.bytes,
                                 s.wireBytes, s.seconds);
             return rows;
           })
      .def("reset_stats", [](PyComm& c) { c.comm().resetStats(); })
      .def("write_hang_report", [](PyComm& c) { c.comm().writeHangReport(); })
      .def(
          "algorithm_for",
          [](PyComm& c, const std::string& coll, long long count, const std::string& dtype, int op,
             int root, bool inPlace) {
            const char* api = "algorithm_for";
            auto k = parseCollName(coll);
            if (!k)
              throw nb::value_error(("algorithm_for: 'coll' is '" + coll +
                                     "', not a collective (all_reduce, all_gather, "
                                     "reduce_scatter, broadcast, reduce, all_to_all, gather, "
                                     "scatter)")
                                        .c_str());
            if (count <= 0)
              throw nb::value_error(
                  ("algorithm_for: 'count' is " + std::to_string(count) + ", must be >= 1")
                      .c_str());
            DataType t = parseDtype(api, "dtype", dtype);
            if (op < 0 || op >= kNumRedOps)
              throw nb::value_error(
                  ("algorithm_for: 'op' is " + std::to_string(op) + ", outside [0, 5)").c_str());
            if (root < 0 || root >= c.size())
              throw nb::value_error(("algorithm_for: 'root' is " + std::to_string(root) +
                                     ", outside [0, " + std::to_string(c.size()) + ")")
                                        .c_str());
            auto r = c.comm().algorithmFor(*k, static_cast<size_t>(count), t,
                                           static_cast<RedOp>(op), root, inPlace);
            if (!r) raiseStatus(r.status());
            return std::make_tuple(r->algorithm, r->predictedUs, r->reason);
          },
          nb::arg("coll"), nb::arg("count"), nb::arg("dtype"), nb::arg("op"), nb::arg("root"),
          nb::arg("in_place"))
      .def("set_algorithm",
           [](PyComm& c, const std::string& coll, const std::string& name) {
             auto k = parseCollName(coll);
             if (!k)
               throw nb::value_error(
                   ("set_algorithm: 'coll' is '" + coll + "', not a collective").c_str());
             Status s = c.comm().setAlgorithm(*k, name);
             if (!s.isOk()) raiseStatus(s);
           })
      .def_static("algorithms", [](const std::string& coll) {
        auto k = parseCollName(coll);
        if (!k)
          throw nb::value_error(("algorithms: 'coll' is '" + coll + "', not a collective").c_str());
        return Communicator::algorithms(*k);
      });
  bindCollectives(cls);
}

}  // namespace tutti::py

NB_MODULE(_tutti, m) {
  m.doc() = "tutti's C++ communicator, bound with nanobind. Use the `tutti` package instead.";
  tutti::py::bindAll(m);
}
