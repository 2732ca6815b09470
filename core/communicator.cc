// File: core/communicator.cc
// CommImpl: initialisation (bootstrap, peer info, transport choice per peer), argument checks,
// the plan cache, blocking and asynchronous execution, errors and abort.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/fusion.h"
#include "algorithms/schedule_json.h"
#include "algorithms/verifier.h"
#include "base/env.h"
#include "base/log.h"
#include "base/strings.h"
#include "core/comm.h"
#include "core/huge_pages.h"
#include "core/wait.h"

namespace tutti::detail {

namespace {

TUTTI_PARAM_STRING(kScheduleFile, "TUTTI_SCHEDULE_FILE", nullptr, "ALGO", "",
                   "comma-separated JSON schedule files to load and select (docs/SCHEDULES.md)");
TUTTI_PARAM_INT(kTimeoutSec, "TUTTI_TIMEOUT", nullptr, "CORE", 0,
                "collective timeout in seconds (0 = none; dead peers are still detected)");
TUTTI_PARAM_INT(kSpinCount, "TUTTI_SPIN_COUNT", nullptr, "CORE", -1,
                "idle progress passes before a waiting rank yields, and at most 2 ms of them (-1: "
                "100000 for a rank bound to CPUs no other rank of its host uses; 0 when this host "
                "runs more ranks than the CPUs its ranks may use together; 1000 otherwise)");
constexpr int kSpinCountDefault = 1000;
constexpr int kBoundSpinCount = 100000;
TUTTI_PARAM_INT(kBootstrapTimeoutSec, "TUTTI_BOOTSTRAP_TIMEOUT", nullptr, "CORE", 120,
                "bootstrap timeout in seconds");

constexpr char kSep = '\x1f';

}  // namespace

// ---- WorkState ----

void WorkState::finish(Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(s);
    done_ = true;
  }
  cv_.notify_all();
}
Status WorkState::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}
bool WorkState::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}
Status WorkState::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? status_ : Status(Code::kInProgress, "operation in progress");
}

// ---- creation ----

Result<std::shared_ptr<CommImpl>> CommImpl::create(const bootstrap::IdData& id, int rank,
                                                   int nranks, const Options& options,
                                                   std::shared_ptr<TaskQueue> progress) {
  log::init();
  if (nranks < 1) return invalidArgument("Communicator::create: nranks must be >= 1 (nranks={})", nranks);
  if (rank < 0 || rank >= nranks)
    return invalidArgument("Communicator::create: rank {} is outside [0, {})", rank, nranks);
  std::shared_ptr<CommImpl> c(new CommImpl());
  c->rank_ = rank;
  c->nranks_ = nranks;
  c->ownsProgress_ = !progress;
  c->progress_ = progress ? std::move(progress) : std::make_shared<TaskQueue>();
  log::setRank(rank);
  TUTTI_TRY(c->init(id, options));
  return c;
}

Status CommImpl::init(const bootstrap::IdData& id, const Options& options) {
  auto bootTimeout = options.bootstrapTimeout.count() > 0
                         ? options.bootstrapTimeout
                         : std::chrono::milliseconds(kBootstrapTimeoutSec.get() * 1000);
  TUTTI_TRY_ASSIGN(net_, PeerSet::connect(id, rank_, nranks_, options, bootTimeout));

  exec_.rank = rank_;
  exec_.nranks = nranks_;
  for (auto& c : net_->conns()) exec_.conns.push_back(c.get());
  for (auto& p : net_->peers()) exec_.peerHosts.push_back(p.hostname);
  exec_.doorbellOwner = net_->doorbellOwner();
  exec_.abort = &abort_;
  // Spin only when every rank of this host can have a CPU of its own: the host's ranks share
  // their CPU sets (sched_getaffinity), and their union must hold at least as many CPUs as there
  // are ranks. (A rank's own set is not enough: a launcher that pins each rank to one core, as
  // mpirun does, would make every rank look oversubscribed and stop spinning, doubling the
  // latency of small messages.)
  {
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) CPU_ZERO(&cpus);
    std::string mine;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &cpus)) mine += fmt::format("{},", c);
    TUTTI_TRY_ASSIGN(auto sets, net_->boot().allGather(mine));
    cpu_set_t hostCpus;
    CPU_ZERO(&hostCpus);
    int local = 0;
    bool exclusive = true;  // no other rank of this host may run on this rank's CPUs
    for (int p = 0; p < nranks_; ++p) {
      if (net_->peers()[p].hostId != net_->peers()[rank_].hostId) continue;
      ++local;
      for (const auto& c : split(sets[p], ','))
        if (auto v = env::parseInt(trim(c)); v && *v >= 0 && *v < CPU_SETSIZE) {
          CPU_SET(static_cast<int>(*v), &hostCpus);
          if (p != rank_ && CPU_ISSET(static_cast<int>(*v), &cpus)) exclusive = false;
        }
    }
    // A rank bound to CPUs of its own (a launcher's binding: fewer CPUs than the machine has, none
    // shared with another rank of this host) spins longer before it yields: no rank of ours
    // waits for those CPUs, and a rank that sleeps lets the kernel move another process onto its
    // CPU, which its wake-up then waits behind. Beside one busy process on the 2-core VM this took
    // a 2-rank 4 MiB allreduce from 1.9 to 1.4 ms (docs/PERFORMANCE.md "On a busy machine").
    const bool oversubscribed = local > std::max(1, CPU_COUNT(&hostCpus));
    const bool bound = exclusive && local > 1 && CPU_COUNT(&cpus) > 0 &&
                       CPU_COUNT(&cpus) < sysconf(_SC_NPROCESSORS_ONLN);
    exec_.spinCount = static_cast<int>(kSpinCount.get());
    if (exec_.spinCount < 0)
      exec_.spinCount = oversubscribed ? 0 : bound ? kBoundSpinCount : kSpinCountDefault;
    exec_.spinBudget = exec_.spinCount;
    exec_.adaptiveSpin = CPU_COUNT(&cpus) > 1 && !bound;
    TUTTI_LOG_INFO(Subsys::kInit, "init: a waiting rank spins {} passes, then yields ({})",
                   exec_.spinCount,
                   kSpinCount.get() >= 0 ? "TUTTI_SPIN_COUNT"
                   : oversubscribed      ? "ranks outnumber CPUs"
                   : bound               ? "bound to CPUs of its own"
                   : exec_.adaptiveSpin  ? "CPUs shared, adaptive"
                                         : "one CPU, shared");
  }
  exec_.timeout = options.timeout.count() > 0
                      ? options.timeout
                      : std::chrono::milliseconds(kTimeoutSec.get() * 1000);
  diag_.attach({rank_, nranks_, net_->peers()[rank_].hostname, &net_->boot(),
                [this] { return failed(); },
                [this](const std::string& prefix) { reportQueued(prefix); }},
               options.checkCalls, exec_);

  if (log::enabled(LogLevel::kInfo, Subsys::kInit)) {
    std::string summary;
    for (int p = 0; p < nranks_; ++p) summary += fmt::format(" {}:{}", p, net_->transportName(p));
    TUTTI_LOG_INFO(Subsys::kInit, "init: rank {}/{} on {} connected:{}", rank_, nranks_,
                   net_->peers()[rank_].hostname, summary);
  }

  TUTTI_TRY(selection_.init(*net_, rank_, nranks_, [this](const std::vector<int>& hostOfRank) {
    return calibrate(hostOfRank);
  }));
  diag_.startTrace(exec_);  // after calibration: its exchanges are not the user's calls

  for (auto& path : split(kScheduleFile.get(), ',')) {
    path = trim(path);
    if (path.empty()) continue;
    TUTTI_TRY_ASSIGN(std::string name, loadSchedule(path));
    TUTTI_LOG_INFO(Subsys::kAlgo, "init: loaded schedule '{}' from {}", name, path);
  }

  return Status::ok();
}

CommImpl::~CommImpl() {
  closing_.store(true);
  diag_.detach();
  // The queued tasks run (and fail fast) first. A shared queue is its owner's to stop: its owner
  // stops it before letting go of this communicator.
  if (ownsProgress_) progress_->stop(std::chrono::hours(24), false);
}

std::string CommImpl::transportTo(int peer) const {
  return peer >= 0 && peer < nranks_ ? net_->transportName(peer) : std::string();
}

// ---- errors ----

Status CommImpl::failed() const {
  // Hot path: one relaxed load while nothing failed (no lock, no formatting).
  if (!hasError_.load(std::memory_order_acquire) && !abort_.load(std::memory_order_relaxed))
    return Status::ok();
  if (abort_.load()) return invalidUsage("communicator was aborted (rank {})", rank_);
  std::lock_guard<std::mutex> lock(errMu_);
  if (!firstError_.isOk())
    return Status(firstError_.code(), "communicator failed earlier: " + firstError_.message());
  return Status::ok();
}

void CommImpl::recordError(const Status& s) {
  if (s.isOk()) return;
  std::lock_guard<std::mutex> lock(errMu_);
  if (firstError_.isOk()) firstError_ = s;
  hasError_.store(true, std::memory_order_release);
}

Status CommImpl::asyncError() const {
  std::lock_guard<std::mutex> lock(errMu_);
  return firstError_;
}

void CommImpl::abort() {
  abort_.store(true);
  recordError(invalidUsage("communicator was aborted (rank {})", rank_));
}

Status CommImpl::setAlgorithm(Coll coll, const std::string& name) {
  if (name.empty()) {
    selectAlgorithm(coll, "");
    return Status::ok();
  }
  if (!algo::find(coll, name)) {
    std::string names;
    for (auto& a : algo::registry())
      if (a.coll == coll) names += (names.empty() ? "" : ", ") + std::string(a.name);
    return invalidArgument("setAlgorithm: no algorithm '{}' for {} (available: {})", name,
                           collName(coll), names);
  }
  selectAlgorithm(coll, name);
  return Status::ok();
}

void CommImpl::selectAlgorithm(Coll coll, const std::string& name) {
  selection_.setOverride(coll, name);
  plans_.clear(coll);  // its cached plans may have been built with the previous choice
}

Result<algo::Decision> CommImpl::explain(Coll coll, size_t count, DataType dtype, RedOp op,
                                         int root, bool inPlace) {
  if (count == 0 && coll != Coll::kBarrier)
    return invalidArgument("algorithmFor: count 0 runs no algorithm");
  if (!isValid(dtype) || !isValid(op))
    return invalidArgument("algorithmFor: invalid dtype or op (dtype={}, op={})",
                           static_cast<int>(dtype), static_cast<int>(op));
  if (root < 0 || root >= nranks_)
    return invalidArgument("algorithmFor: root {} is outside [0, {})", root, nranks_);
  if (coll == Coll::kSendRecv)
    return invalidArgument("algorithmFor: point-to-point calls run no algorithm");
  algo::CollShape shape{coll, rank_, nranks_, count, dtype, op, root, inPlace};
  shape.hostOf = selection_.hostOf();
  return selection_.decide(shape, "algorithmFor");
}

Result<std::string> CommImpl::loadSchedule(const std::string& path) {
  // Once per process and path: several communicators may load the same file.
  static std::mutex mu;
  static std::map<std::string, std::pair<Coll, std::string>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(path);
  if (it == loaded.end()) {
    TUTTI_TRY_ASSIGN(algo::LoadedSchedule s, algo::loadScheduleFile(path));
    const Coll coll = s.coll;
    std::string name = s.name;
    TUTTI_TRY(algo::registerLoaded(std::move(s)));
    it = loaded.emplace(path, std::make_pair(coll, name)).first;
    selection_.forgetDecisions();
  }
  selectAlgorithm(it->second.first, it->second.second);
  return it->second.second;
}

// ---- argument checks ----

Status CommImpl::check(const CallArgs& a, bool* inPlace) const {
  return checkCall(a, rank_, nranks_, inPlace);
}

// ---- plans ----

algo::CollShape CommImpl::shapeOf(const CallArgs& a, bool inPlace) const {
  algo::CollShape shape{a.coll, rank_, nranks_, a.count, a.dtype, a.op, a.root, inPlace};
  shape.hostOf = selection_.hostOf();
  return shape;
}

Result<Plan*> CommImpl::plan(const CallArgs& a, bool inPlace) {
  const PlanCache::Key key = PlanCache::keyOf(a, inPlace);
  if (Plan* cached = plans_.find(key)) return cached;
  auto p = std::make_unique<Plan>();
  p->coll = a.coll;
  p->elemBytes = a.coll == Coll::kBarrier ? 1 : dataTypeBytes(a.dtype);
  const RedOp kernelOp = a.op == RedOp::kAvg ? RedOp::kSum : a.op;
  p->reduce = kernels::reduce2Fn(a.dtype, kernelOp);
  const algo::CollShape shape = shapeOf(a, inPlace);
  if (a.coll == Coll::kSendRecv) {
    p->algorithm = "p2p";
    std::vector<algo::Step> round;
    if (a.sendPeer >= 0)
      round.push_back({.op = algo::Op::kSend, .peer = a.sendPeer, .src = algo::Buf::kInput,
                       .count = a.count});
    if (a.recvPeer >= 0)
      round.push_back({.op = algo::Op::kRecv, .peer = a.recvPeer, .dst = algo::Buf::kOutput,
                       .count = a.count});
    p->schedule.rounds.push_back(std::move(round));
  } else {
    TUTTI_TRY_ASSIGN(algo::Decision decision, selection_.decide(shape, a.api));
    const algo::AlgorithmInfo* info = decision.algo;
    if (info->loaded) {  // user-supplied: prove it for this size and count before running it
      Status v = algo::verifyAlgorithm(*info, shape);
      if (!v.isOk())
        return invalidUsage("{}: schedule '{}' failed verification for nranks={} count={}: {}",
                            a.api, info->name, nranks_, a.count, v.message());
    }
    TUTTI_TRY_ASSIGN(p->schedule, info->build(shape));
    p->algorithm = std::string(info->name);
  }
  if (a.op == RedOp::kAvg) {
    const bool holdsResult = a.coll == Coll::kAllReduce || a.coll == Coll::kReduceScatter ||
                             (a.coll == Coll::kReduce && rank_ == a.root);
    if (holdsResult && nranks_ > 1) {
      p->divide = kernels::divideFn(a.dtype);
      p->divideCount = a.count;
      p->divisor = nranks_;
    }
  }
  p->scratchBytes = p->schedule.scratchCount * p->elemBytes;
  p->callBytes = messageBytes(a.coll, a.count, a.dtype, nranks_);
  // adviseHugePages' own first test, once per plan: no buffer of the call is larger than
  // count * element * nranks bytes.
  const size_t huge = hugepages::thresholdBytes();
  p->adviseHuge = huge > 0 && a.count * p->elemBytes * static_cast<size_t>(nranks_) >= huge;
  // Past the cache, the local copies that write their range for the last time bypass it (2-rank
  // allgather 64 MiB 9.4 -> 7.8 ms), and so do an allreduce's
  // receives. Receives only in an allreduce: there the receiving rank also streams its input and
  // the reductions through the cache; for the copy-only collectives (broadcast, allgather,
  // alltoall) 2 ranks measured 10-30% slower with it.
  if (const size_t stream = selection_.streamBytes();
      stream > 0 && algo::bufferCount(shape, algo::Buf::kOutput) * p->elemBytes >= stream)
    p->streaming = algo::lastTouchWrites(p->schedule, inPlace, a.coll == Coll::kAllReduce);
  TUTTI_TRY_ASSIGN(Plan * raw, plans_.insert(key, std::move(p), a.api));
  TUTTI_LOG_INFO(Subsys::kColl, "{}: plan '{}' for count={} dtype={} op={} root={} inPlace={}",
                 a.api, raw->algorithm, a.count, dataTypeName(a.dtype), redOpName(a.op), a.root,
                 inPlace);
  return raw;
}

// ---- execution ----

Status CommImpl::execute(const CallArgs& a, bool inPlace) {
  if (a.count == 0 && a.coll != Coll::kBarrier) return Status::ok();
  if (!healthy()) TUTTI_TRY(failed());
  ++seq_;
  auto p = plan(a, inPlace);
  if (!p.isOk()) return p.status();
  diag_.begin(a.coll != Coll::kSendRecv ? &a : nullptr, a.coll, seq_, exec_);
  Plan& plan = *p.value();
  // Not for calibration's exchanges (init): their buffers are freed at once, and the registry of
  // regions, kept by address, would count those uses against the caller's buffers mapped there
  // later (which then never moved to huge pages).
  if (plan.adviseHuge && !(a.api && std::string_view(a.api) == kCalibrateApi))
    plans_.adviseHugePages(a, plan, rank_, nranks_);
  StatsTable& stats = diag_.stats();
  const bool timed = stats.timeThis(plan.stats);
  const uint64_t k0 = timed ? stats.now() : 0;
  const auto t0 = diag_.tracing() ? std::chrono::steady_clock::now()
                                  : std::chrono::steady_clock::time_point{};
  Status s = tutti::execute(plan, a.send, a.recv, plans_.scratch(), exec_, seq_);
  // The common ending inline (no trace, no error): the out-of-line afterCall costs about 15 ns of
  // a 1-rank 8-byte call.
  if (s.isOk() && !diag_.tracing()) {
    diag_.ok(plan, timed, k0, exec_.bytesMoved);
    return s;
  }
  return afterCall(a, plan, std::move(s), timed, k0, t0);
}

Status CommImpl::afterCall(const CallArgs& a, Plan& plan, Status s, bool timed, uint64_t k0,
                           std::chrono::steady_clock::time_point t0) {
  if (s.isOk())
    diag_.ok(plan, timed, k0, exec_.bytesMoved);
  else
    s = callFailed(a.coll, std::move(s));
  if (diag_.tracing()) diag_.trace(a, plan, s, seq_, exec_.bytesMoved, t0);
  return s;
}

Status CommImpl::callFailed(Coll coll, Status s) {
  s = diag_.failed(coll, std::move(s), seq_, exec_);
  recordError(s);
  diag_.tellOthers(s, abort_.load());
  return s;
}

void CommImpl::reportQueued(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(argsMu_);
  for (const CallArgs& a : queuedArgs_)
    hang::writeLine(fmt::format("{}: queued, not started: {}(count={}, dtype={}, op={}, root={})",
                                prefix, collName(a.coll), a.count, dataTypeName(a.dtype),
                                redOpName(a.op), a.root));
}

Status CommImpl::run(const CallArgs& a) {
  if (!healthy()) TUTTI_TRY(failed());
  bool inPlace = false;
  if (progress_->pending() != 0) {  // asynchronous work first
    TUTTI_TRY(check(a, &inPlace));
    drainQueue();
    std::lock_guard<std::mutex> lock(execMu_);
    return execute(a, inPlace);
  }
  std::lock_guard<std::mutex> lock(execMu_);
  // A call identical to the previous one passed the same checks: skip them (hot path).
  const CallArgs& l = lastChecked_;
  if (l.api != a.api || l.coll != a.coll || l.send != a.send || l.recv != a.recv ||
      l.count != a.count || l.dtype != a.dtype || l.op != a.op || l.root != a.root ||
      l.sendPeer != a.sendPeer || l.recvPeer != a.recvPeer) {
    TUTTI_TRY(check(a, &inPlace));
    lastChecked_ = a;
    lastInPlace_ = inPlace;
  }
  inPlace = lastInPlace_;
  return execute(a, inPlace);
}

Status CommImpl::runChecked(const CallArgs& a) {
  if (!healthy()) TUTTI_TRY(failed());
  const bool inPlace = inPlaceOf(a, rank_, nranks_);
  if (progress_->pending() != 0) drainQueue();
  std::lock_guard<std::mutex> lock(execMu_);
  return execute(a, inPlace);
}

Result<int> CommImpl::recvAny(CallArgs a, std::span<const int> peers) {
  TUTTI_TRY(failed());
  bool inPlace = false;
  TUTTI_TRY(check(a, &inPlace));
  drainQueue();
  std::lock_guard<std::mutex> lock(execMu_);
  if (!healthy()) TUTTI_TRY(failed());
  // Begun as the receive it becomes (execute begins it again), so that hang reports and other
  // ranks' failure notices reach the wait.
  diag_.begin(nullptr, Coll::kSendRecv, seq_ + 1, exec_);
  Result<int> from = waitForIncoming(exec_, peers, anyTurn_++, "recvAny");
  if (!from) {
    if (from.status().code() == Code::kInvalidArgument ||
        from.status().code() == Code::kInvalidUsage) {  // aborted, or a transport without probe
      diag_.end();
      return from.status();
    }
    return callFailed(Coll::kSendRecv, from.status());
  }
  a.recvPeer = from.value();
  TUTTI_TRY(execute(a, inPlace));
  return from.value();
}

Result<Work> CommImpl::runAsync(const CallArgs& a) {
  TUTTI_TRY(failed());
  bool inPlace = false;
  TUTTI_TRY(check(a, &inPlace));
  auto state = std::make_shared<WorkState>();
  queueTask(a, [this, a, inPlace, state] {
    std::lock_guard<std::mutex> execLock(execMu_);
    state->finish(execute(a, inPlace));
  });
  return Work(state);
}

void CommImpl::queueTask(const CallArgs& a, std::function<void()> task) {
  // One lock around both, so that the labels keep the tasks' order.
  std::lock_guard<std::mutex> lock(argsMu_);
  queuedArgs_.push_back(a);
  progress_->submit([this, task = std::move(task)] {
    {
      std::lock_guard<std::mutex> lock(argsMu_);
      queuedArgs_.pop_front();
    }
    task();
  });
}

Status CommImpl::runPlan(Plan& plan, const void* input, void* output, const CallArgs* signAs) {
  TUTTI_TRY(failed());
  drainQueue();
  std::lock_guard<std::mutex> lock(execMu_);
  TUTTI_TRY(failed());
  TUTTI_TRY(plans_.reserveScratch(plan.scratchBytes, std::string(collName(plan.coll)).c_str()));
  ++seq_;
  diag_.begin(signAs, plan.coll, seq_, exec_);
  Status s = tutti::execute(plan, input, output, plans_.scratch(), exec_, seq_);
  return s.isOk() ? s : callFailed(plan.coll, std::move(s));
}

Result<const Plan*> CommImpl::planFor(const CallArgs& args, bool inPlace, bool forwardRounds) {
  TUTTI_TRY(failed());
  drainQueue();
  std::lock_guard<std::mutex> lock(execMu_);
  TUTTI_TRY_ASSIGN(Plan * p, plan(args, inPlace));
  if (forwardRounds && !p->forwardRoundsKnown) {
    const algo::AlgorithmInfo* info = algo::find(args.coll, p->algorithm);
    if (info == nullptr)
      return internalError("{}: plan names '{}', which is not a {} algorithm", args.api,
                           p->algorithm, collName(args.coll));
    TUTTI_TRY_ASSIGN(p->forwardRounds, algo::forwardRounds(*info, shapeOf(args, inPlace)));
    p->forwardRoundsKnown = true;
  }
  return static_cast<const Plan*>(p);
}

bool CommImpl::findFused(const PlanCache::FusedKey& key, std::shared_ptr<Plan>* plan) {
  std::lock_guard<std::mutex> lock(execMu_);
  return plans_.findFused(key, plan);
}

void CommImpl::storeFused(PlanCache::FusedKey key, std::shared_ptr<Plan> plan) {
  std::lock_guard<std::mutex> lock(execMu_);
  plans_.insertFused(std::move(key), std::move(plan));
}

}  // namespace tutti::detail
