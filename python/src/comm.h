// File: python/src/comm.h
// The extension's classes: _Comm (a tutti::Communicator plus the argument checks of every
// collective), Work (an asynchronous call, or several) and UniqueId. The public, documented API
// is the Python layer in python/tutti/, which allocates default outputs and calls these.
#pragma once

#include <nanobind/nanobind.h>

#include <mutex>
#include <tutti/tutti.hpp>
#include <vector>

#include "python/src/arrays.h"

namespace tutti::py {

/// Raises the tutti exception (tutti._errors) for a failed Status, keeping its message.
[[noreturn]] void raiseStatus(const Status& s);

/// One or more asynchronous calls and what they need alive: the imported buffers, the
/// communicator's Python object and the result handed back by wait().
class PyWork {
 public:
  PyWork(std::vector<Work> works, nb::object comm, nb::object result, std::vector<InBuffer> ins,
         std::vector<OutBuffer> outs)
      : works_(std::move(works)),
        comm_(std::move(comm)),
        result_(std::move(result)),
        ins_(std::move(ins)),
        outs_(std::move(outs)) {}
  PyWork(PyWork&&) = default;
  PyWork& operator=(PyWork&&) = delete;
  /// Waits (GIL released) for calls still running, since the buffers are about to be released.
  ~PyWork();

  /// Blocks until every call finished (GIL released); raises the first error; returns result.
  nb::object wait();
  /// True once every call finished (successfully or not); never blocks.
  bool isCompleted() const;
  /// The first error as an exception object once finished, else None.
  nb::object exception() const;

 private:
  std::vector<Work> works_;
  nb::object comm_;
  nb::object result_;
  std::vector<InBuffer> ins_;
  std::vector<OutBuffer> outs_;
};

/// A tutti::Communicator used from Python. Calls from several Python threads are serialised by
/// mu_ (a Communicator serves one thread at a time); the GIL is released before mu_ is taken.
class PyComm {
 public:
  PyComm(Communicator comm, Options options)
      : comm_(std::move(comm)), options_(std::move(options)) {}
  ~PyComm();

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const Options& options() const { return options_; }
  Communicator& comm() { return comm_; }
  std::mutex& mutex() { return mu_; }

  /// Destroys the communicator now (GIL released: queued asynchronous calls finish first).
  void close();

 private:
  Communicator comm_;
  Options options_;
  std::mutex mu_;
};

/// Adds UniqueId, Work, _Comm and the module functions to `m`.
void bindAll(nb::module_& m);
/// The collectives of _Comm (collectives.cc).
void bindCollectives(nb::class_<PyComm>& cls);

}  // namespace tutti::py
