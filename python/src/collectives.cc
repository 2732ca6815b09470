// File: python/src/collectives.cc
// The collectives of _Comm. Each one checks its arguments completely (types, layout, element
// counts, root, peer, op) before anything runs, so a bad call raises and changes nothing; then
// it runs blocking (GIL released) or queues the call and returns a Work holding the buffers.
// Element counts follow include/tutti/tutti.hpp (NCCL's conventions).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "python/src/comm.h"

namespace tutti::py {

namespace {

RedOp checkOp(const char* api, int op) {
  if (op < 0 || op >= kNumRedOps)
    throw nb::value_error((std::string(api) + ": 'op' is " + std::to_string(op) + ", outside [0, " +
                           std::to_string(kNumRedOps) + ") (sum=0, prod=1, max=2, min=3, avg=4)")
                              .c_str());
  return static_cast<RedOp>(op);
}

void checkRank(const char* api, const char* arg, int value, const PyComm& c) {
  if (value < 0 || value >= c.size())
    throw nb::value_error((std::string(api) + ": '" + arg + "' is " + std::to_string(value) +
                           ", outside [0, " + std::to_string(c.size()) +
                           ") (size=" + std::to_string(c.size()) + ")")
                              .c_str());
}

std::string sizeNote(const PyComm& c) { return "size=" + std::to_string(c.size()); }

// Runs `sync` with the GIL released (blocking), or queues `async` and wraps its Work with what
// must stay alive until it completes. The lambdas read only pointers and counts taken from the
// buffers before these are moved into the Work.
template <typename Sync, typename Async>
nb::object dispatch(PyComm& c, bool asyncOp, nb::handle result, std::vector<InBuffer> ins,
                    std::vector<OutBuffer> outs, Sync&& sync, Async&& async) {
  if (!asyncOp) {
    Status s = [&] {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(c.mutex());
      return sync(c.comm());
    }();
    if (!s.isOk()) raiseStatus(s);
    return nb::none();
  }
  Result<Work> w = [&]() -> Result<Work> {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(c.mutex());
    return async(c.comm());
  }();
  if (!w) raiseStatus(w.status());
  std::vector<Work> works;
  works.push_back(std::move(w.value()));
  return nb::cast(PyWork(std::move(works), nb::borrow(nb::find(&c)), nb::borrow(result),
                         std::move(ins), std::move(outs)));
}

template <typename T>
std::vector<T> one(T&& b) {
  std::vector<T> v;
  v.push_back(std::move(b));
  return v;
}

// In-place calls (out is array) import the array once, writable; out-of-place ones import the
// input read-only and the output writable. Returns (send pointer, input buffers).
struct InOut {
  std::vector<InBuffer> ins;
  OutBuffer out;
  const void* send = nullptr;
  size_t inCount = 0;
  DataType inDtype = DataType::kUint8;
};
InOut importInOut(const char* api, nb::handle array, nb::handle out) {
  InOut io;
  if (out.is(array)) {
    io.out = importOutput(api, "array", array);
    io.send = io.out.data;
    io.inCount = io.out.count;
    io.inDtype = io.out.dtype;
    return io;
  }
  InBuffer in = importInput(api, "array", array);
  io.out = importOutput(api, "out", out);
  requireSameDtype(api, "out", io.out.dtype, "array", in.dtype);
  io.send = in.data;
  io.inCount = in.count;
  io.inDtype = in.dtype;
  io.ins.push_back(std::move(in));
  return io;
}

}  // namespace

void bindCollectives(nb::class_<PyComm>& cls) {
  cls.def(
      "all_reduce",
      [](PyComm& c, nb::handle array, nb::handle out, int op, bool asyncOp) {
        const char* api = "all_reduce";
        const RedOp o = checkOp(api, op);
        InOut io = importInOut(api, array, out);
        requireCount(api, "out", io.out.count, io.inCount, "as many as 'array'");
        const void* s = io.send;
        void* r = io.out.data;
        const size_t n = io.inCount;
        const DataType t = io.inDtype;
        return dispatch(
            c, asyncOp, out, std::move(io.ins), one(std::move(io.out)),
            [&](Communicator& k) { return k.allReduce(s, r, n, t, o); },
            [&](Communicator& k) { return k.allReduceAsync(s, r, n, t, o); });
      },
      nb::arg("array"), nb::arg("out"), nb::arg("op"), nb::arg("async_op"));

  cls.def(
      "all_gather",
      [](PyComm& c, nb::handle array, nb::handle out, bool asyncOp) {
        const char* api = "all_gather";
        InBuffer in = importInput(api, "array", array);
        OutBuffer ou = importOutput(api, "out", out);
        requireSameDtype(api, "out", ou.dtype, "array", in.dtype);
        requireCount(api, "out", ou.count, in.count * c.size(),
                     "size x the elements of 'array', " + sizeNote(c));
        const void* s = in.data;
        void* r = ou.data;
        const size_t n = in.count;
        const DataType t = in.dtype;
        return dispatch(
            c, asyncOp, out, one(std::move(in)), one(std::move(ou)),
            [&](Communicator& k) { return k.allGather(s, r, n, t); },
            [&](Communicator& k) { return k.allGatherAsync(s, r, n, t); });
      },
      nb::arg("array"), nb::arg("out"), nb::arg("async_op"));

  cls.def(
      "reduce_scatter",
      [](PyComm& c, nb::handle array, nb::handle out, int op, bool asyncOp) {
        const char* api = "reduce_scatter";
        const RedOp o = checkOp(api, op);
        InBuffer in = importInput(api, "array", array);
        OutBuffer ou = importOutput(api, "out", out);
        requireSameDtype(api, "out", ou.dtype, "array", in.dtype);
        requireCount(api, "array", in.count, ou.count * c.size(),
                     "size x the elements of 'out', " + sizeNote(c));
        const void* s = in.data;
        void* r = ou.data;
        const size_t n = ou.count;
        const DataType t = in.dtype;
        return dispatch(
            c, asyncOp, out, one(std::move(in)), one(std::move(ou)),
            [&](Communicator& k) { return k.reduceScatter(s, r, n, t, o); },
            [&](Communicator& k) { return k.reduceScatterAsync(s, r, n, t, o); });
      },
      nb::arg("array"), nb::arg("out"), nb::arg("op"), nb::arg("async_op"));

  // The root sends `array` into every rank's `out`; other ranks' `array` is not used.
  cls.def(
      "broadcast",
      [](PyComm& c, nb::handle array, nb::handle out, int root, bool asyncOp) {
        const char* api = "broadcast";
        checkRank(api, "root", root, c);
        InOut io;
        if (c.rank() == root) {
          io = importInOut(api, array, out);
          requireCount(api, "out", io.out.count, io.inCount, "as many as 'array'");
        } else {
          io.out = importOutput(api, out.is(array) ? "array" : "out", out);
          io.send = io.out.data;  // not read on this rank
        }
        const void* s = io.send;
        void* r = io.out.data;
        const size_t n = io.out.count;
        const DataType t = io.out.dtype;
        return dispatch(
            c, asyncOp, out, std::move(io.ins), one(std::move(io.out)),
            [&](Communicator& k) { return k.broadcast(s, r, n, t, root); },
            [&](Communicator& k) { return k.broadcastAsync(s, r, n, t, root); });
      },
      nb::arg("array").none(), nb::arg("out"), nb::arg("root"), nb::arg("async_op"));

  // Only the root's `out` receives the result; other ranks may pass None.
  cls.def(
      "reduce",
      [](PyComm& c, nb::handle array, nb::handle out, int op, int root, bool asyncOp) {
        const char* api = "reduce";
        const RedOp o = checkOp(api, op);
        checkRank(api, "root", root, c);
        InOut io;
        std::vector<OutBuffer> outs;
        void* r = nullptr;
        if (c.rank() == root) {
          io = importInOut(api, array, out);
          requireCount(api, "out", io.out.count, io.inCount, "as many as 'array'");
          r = io.out.data;
          outs.push_back(std::move(io.out));
        } else {
          InBuffer in = importInput(api, "array", array);
          io.send = in.data;
          io.inCount = in.count;
          io.inDtype = in.dtype;
          io.ins.push_back(std::move(in));
        }
        const void* s = io.send;
        const size_t n = io.inCount;
        const DataType t = io.inDtype;
        return dispatch(
            c, asyncOp, c.rank() == root ? out : nb::none(), std::move(io.ins), std::move(outs),
            [&](Communicator& k) { return k.reduce(s, r, n, t, o, root); },
            [&](Communicator& k) { return k.reduceAsync(s, r, n, t, o, root); });
      },
      nb::arg("array"), nb::arg("out").none(), nb::arg("op"), nb::arg("root"), nb::arg("async_op"));

  cls.def(
      "all_to_all",
      [](PyComm& c, nb::handle array, nb::handle out, bool asyncOp) {
        const char* api = "all_to_all";
        InBuffer in = importInput(api, "array", array);
        OutBuffer ou = importOutput(api, "out", out);
        requireSameDtype(api, "out", ou.dtype, "array", in.dtype);
        if (in.count % c.size() != 0)
          throw nb::value_error((std::string(api) + ": 'array' has " + std::to_string(in.count) +
                                 " elements, not a multiple of size (" + sizeNote(c) +
                                 "): block j goes to rank j")
                                    .c_str());
        requireCount(api, "out", ou.count, in.count, "as many as 'array'");
        const void* s = in.data;
        void* r = ou.data;
        const size_t n = in.count / c.size();
        const DataType t = in.dtype;
        return dispatch(
            c, asyncOp, out, one(std::move(in)), one(std::move(ou)),
            [&](Communicator& k) { return k.allToAll(s, r, n, t); },
            [&](Communicator& k) { return k.allToAllAsync(s, r, n, t); });
      },
      nb::arg("array"), nb::arg("out"), nb::arg("async_op"));

  // Only the root's `out` receives (size x array's elements); other ranks may pass None.
  cls.def(
      "gather",
      [](PyComm& c, nb::handle array, nb::handle out, int root, bool asyncOp) {
        const char* api = "gather";
        checkRank(api, "root", root, c);
        InBuffer in = importInput(api, "array", array);
        std::vector<OutBuffer> outs;
        void* r = nullptr;
        if (c.rank() == root) {
          OutBuffer ou = importOutput(api, "out", out);
          requireSameDtype(api, "out", ou.dtype, "array", in.dtype);
          requireCount(api, "out", ou.count, in.count * c.size(),
                       "size x the elements of 'array', " + sizeNote(c));
          r = ou.data;
          outs.push_back(std::move(ou));
        }
        const void* s = in.data;
        const size_t n = in.count;
        const DataType t = in.dtype;
        return dispatch(
            c, asyncOp, c.rank() == root ? out : nb::none(), one(std::move(in)), std::move(outs),
            [&](Communicator& k) { return k.gather(s, r, n, t, root); },
            [&](Communicator& k) { return k.gatherAsync(s, r, n, t, root); });
      },
      nb::arg("array").none(), nb::arg("out").none(), nb::arg("root"), nb::arg("async_op"));

  // Only the root's `array` is sent (size x out's elements); other ranks may pass None.
  cls.def(
      "scatter",
      [](PyComm& c, nb::handle array, nb::handle out, int root, bool asyncOp) {
        const char* api = "scatter";
        checkRank(api, "root", root, c);
        OutBuffer ou = importOutput(api, "out", out);
        std::vector<InBuffer> ins;
        const void* s = nullptr;
        if (c.rank() == root) {
          InBuffer in = importInput(api, "array", array);
          requireSameDtype(api, "out", ou.dtype, "array", in.dtype);
          requireCount(api, "array", in.count, ou.count * c.size(),
                       "size x the elements of 'out', " + sizeNote(c));
          s = in.data;
          ins.push_back(std::move(in));
        }
        void* r = ou.data;
        const size_t n = ou.count;
        const DataType t = ou.dtype;
        return dispatch(
            c, asyncOp, out, std::move(ins), one(std::move(ou)),
            [&](Communicator& k) { return k.scatter(s, r, n, t, root); },
            [&](Communicator& k) { return k.scatterAsync(s, r, n, t, root); });
      },
      nb::arg("array").none(), nb::arg("out"), nb::arg("root"), nb::arg("async_op"));

  cls.def(
      "send",
      [](PyComm& c, nb::handle array, int peer) {
        const char* api = "send";
        checkRank(api, "peer", peer, c);
        if (peer == c.rank())
          throw nb::value_error(("send: 'peer' is this rank (" + std::to_string(peer) +
                                 "); use send_recv to exchange with itself")
                                    .c_str());
        InBuffer in = importInput(api, "array", array);
        return dispatch(
            c, false, nb::none(), {}, {},
            [&](Communicator& k) { return k.send(in.data, in.count, in.dtype, peer); },
            [](Communicator&) -> Result<Work> { return Work(); });
      },
      nb::arg("array"), nb::arg("peer"));

  cls.def(
      "recv",
      [](PyComm& c, nb::handle out, int peer) {
        const char* api = "recv";
        checkRank(api, "peer", peer, c);
        if (peer == c.rank())
          throw nb::value_error(("recv: 'peer' is this rank (" + std::to_string(peer) +
                                 "); use send_recv to exchange with itself")
                                    .c_str());
        OutBuffer ou = importOutput(api, "out", out);
        return dispatch(
            c, false, nb::none(), {}, {},
            [&](Communicator& k) { return k.recv(ou.data, ou.count, ou.dtype, peer); },
            [](Communicator&) -> Result<Work> { return Work(); });
      },
      nb::arg("out"), nb::arg("peer"));

  cls.def(
      "recv_any",
      [](PyComm& c, nb::handle out, std::vector<int> peers) {
        const char* api = "recv_any";
        if (peers.empty()) throw nb::value_error("recv_any: 'peers' is empty");
        for (size_t i = 0; i < peers.size(); ++i) {
          const std::string arg = "peers[" + std::to_string(i) + "]";
          checkRank(api, arg.c_str(), peers[i], c);
          if (peers[i] == c.rank())
            throw nb::value_error(("recv_any: '" + arg + "' is this rank (" +
                                   std::to_string(peers[i]) + ")")
                                      .c_str());
        }
        OutBuffer ou = importOutput(api, "out", out);
        if (ou.count == 0)
          throw nb::value_error("recv_any: 'out' has 0 bytes: nothing arrives that could tell "
                                "the sender");
        Result<int> from = [&] {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(c.mutex());
          return c.comm().recvAny(ou.data, ou.count, ou.dtype, peers);
        }();
        if (!from) raiseStatus(from.status());
        return from.value();
      },
      nb::arg("out"), nb::arg("peers"));

  cls.def(
      "send_recv",
      [](PyComm& c, nb::handle array, int sendPeer, nb::handle out, int recvPeer) {
        const char* api = "send_recv";
        checkRank(api, "send_peer", sendPeer, c);
        checkRank(api, "recv_peer", recvPeer, c);
        InBuffer in = importInput(api, "array", array);
        OutBuffer ou = importOutput(api, "out", out);
        requireSameDtype(api, "out", ou.dtype, "array", in.dtype);
        requireCount(api, "out", ou.count, in.count, "as many as 'array'");
        return dispatch(
            c, false, nb::none(), {}, {},
            [&](Communicator& k) {
              return k.sendRecv(in.data, sendPeer, ou.data, recvPeer, in.count, in.dtype);
            },
            [](Communicator&) -> Result<Work> { return Work(); });
      },
      nb::arg("array"), nb::arg("send_peer"), nb::arg("out"), nb::arg("recv_peer"));

  cls.def(
      "send_recv_group",
      [](PyComm& c, nb::list sends, nb::list recvs) {
        const char* api = "send_recv_group";
        std::vector<InBuffer> ins;
        std::vector<OutBuffer> outs;
        std::vector<Communicator::PeerTransfer> ops;
        // Entry i of `l`: its array, its checked peer and its name ("sends[2]").
        struct Entry {
          nb::handle array;
          int peer;
          std::string arg;
        };
        auto entry = [&](nb::list l, size_t i, const char* listName) {
          const std::string arg = std::string(listName) + "[" + std::to_string(i) + "]";
          nb::handle item = l[i];
          if (!nb::isinstance<nb::tuple>(item) || nb::len(item) != 2)
            throw nb::type_error(
                (std::string(api) + ": '" + arg + "' must be a tuple (array, peer)").c_str());
          nb::tuple t = nb::borrow<nb::tuple>(item);
          const int peer = nb::cast<int>(t[1]);
          checkRank(api, (arg + "[1]").c_str(), peer, c);
          return Entry{t[0], peer, arg + "[0]"};
        };
        for (size_t i = 0; i < sends.size(); ++i) {
          Entry e = entry(sends, i, "sends");
          ins.push_back(importInput(api, e.arg.c_str(), e.array));
          ops.push_back({true, ins.back().data, ins.back().count, ins.back().dtype, e.peer});
        }
        for (size_t i = 0; i < recvs.size(); ++i) {
          Entry e = entry(recvs, i, "recvs");
          outs.push_back(importOutput(api, e.arg.c_str(), e.array));
          ops.push_back({false, outs.back().data, outs.back().count, outs.back().dtype, e.peer});
        }
        return dispatch(
            c, false, nb::none(), {}, {},
            [&](Communicator& k) { return k.sendRecvGroup(ops); },
            [](Communicator&) -> Result<Work> { return Work(); });
      },
      nb::arg("sends"), nb::arg("recvs"));

  cls.def(
      "barrier",
      [](PyComm& c, bool asyncOp) {
        return dispatch(
            c, asyncOp, nb::none(), {}, {}, [](Communicator& k) { return k.barrier(); },
            [](Communicator& k) { return k.barrierAsync(); });
      },
      nb::arg("async_op"));

  // Blocking: one Communicator::allReduceFused per run of arrays of one dtype (small arrays fuse
  // into one plan of the separate calls' steps: bit-identical results, one latency). Async: the
  // C++ API has no asynchronous fused entry, so one allReduceAsync per array, all queued, one
  // Work for all of them. Every array is checked before the first call runs.
  cls.def(
      "fused_all_reduce",
      [](PyComm& c, nb::list arrays, int op, bool asyncOp) {
        const char* api = "fused_all_reduce";
        const RedOp o = checkOp(api, op);
        std::vector<OutBuffer> outs;
        outs.reserve(arrays.size());
        for (size_t i = 0; i < arrays.size(); ++i) {
          const std::string arg = "arrays[" + std::to_string(i) + "]";
          outs.push_back(importOutput(api, arg.c_str(), arrays[i]));
        }
        if (!asyncOp) {
          Status s = [&] {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(c.mutex());
            std::vector<Communicator::ReduceBuffer> run;
            for (size_t i = 0; i < outs.size();) {
              size_t j = i;
              run.clear();
              for (; j < outs.size() && outs[j].dtype == outs[i].dtype; ++j)
                run.push_back({outs[j].data, outs[j].data, outs[j].count});
              Status one = c.comm().allReduceFused(run, outs[i].dtype, o);
              if (!one.isOk()) return one;
              i = j;
            }
            return Status::ok();
          }();
          if (!s.isOk()) raiseStatus(s);
          return nb::object(nb::none());
        }
        std::vector<Work> works;
        Status s = [&] {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(c.mutex());
          for (const OutBuffer& b : outs) {
            Result<Work> w = c.comm().allReduceAsync(b.data, b.data, b.count, b.dtype, o);
            if (!w) return w.status();
            works.push_back(std::move(w.value()));
          }
          return Status::ok();
        }();
        // On a failure to queue, the Work waits for the calls already queued when dropped.
        PyWork work(std::move(works), nb::borrow(nb::find(&c)), arrays, {}, std::move(outs));
        if (!s.isOk()) raiseStatus(s);
        return nb::cast(std::move(work));
      },
      nb::arg("arrays"), nb::arg("op"), nb::arg("async_op"));
}

}  // namespace tutti::py
