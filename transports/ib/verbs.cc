// File: transports/ib/verbs.cc
// libibverbs through dlopen: a table of the exported functions used (resolved with dlvsym at the
// base symbol version IBVERBS_1.1, as the header's own prototypes bind), and wrappers that keep
// every verbs type inside this file. The header's static inline helpers are used where they only
// dispatch through context->ops (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq);
// ibv_query_port's inline wrapper is reproduced here because it calls the exported compat
// symbol. Never call another inline helper from verbs.h without checking that it references no
// exported symbol: libtutti.so does not link libibverbs, so such a call would fail only when the
// library is loaded.
#include "transports/ib/verbs.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <mutex>

#include "base/env.h"
#include "base/log.h"

namespace tutti::transport::ib::verbs {
namespace {

// The status numbers wc_status.cc describes must be the library's.
static_assert(IBV_WC_SUCCESS == 0 && IBV_WC_LOC_PROT_ERR == 4 && IBV_WC_WR_FLUSH_ERR == 5 &&
              IBV_WC_REM_ACCESS_ERR == 10 && IBV_WC_RETRY_EXC_ERR == 12 &&
              IBV_WC_RNR_RETRY_EXC_ERR == 13 && IBV_WC_RESP_TIMEOUT_ERR == 20 &&
              IBV_WC_TM_RNDV_INCOMPLETE == 23);
static_assert(static_cast<int>(LinkLayer::kInfiniBand) == IBV_LINK_LAYER_INFINIBAND &&
              static_cast<int>(LinkLayer::kEthernet) == IBV_LINK_LAYER_ETHERNET);
static_assert(IBV_MTU_256 == 1 && IBV_MTU_4096 == 5);
static_assert(sizeof(Gid::raw) == sizeof(ibv_gid::raw));

struct Api {
  void* lib = nullptr;
  ibv_device** (*getDeviceList)(int*) = nullptr;
  void (*freeDeviceList)(ibv_device**) = nullptr;
  const char* (*getDeviceName)(ibv_device*) = nullptr;
  ibv_context* (*openDevice)(ibv_device*) = nullptr;
  int (*closeDevice)(ibv_context*) = nullptr;
  int (*queryDevice)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*queryPortCompat)(ibv_context*, uint8_t, _compat_ibv_port_attr*) = nullptr;
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  // Optional (IBVERBS_1.11, rdma-core 32+): GID types without reading sysfs.
  ssize_t (*queryGidTable)(ibv_context*, ibv_gid_entry*, size_t, uint32_t, size_t) = nullptr;
  ibv_pd* (*allocPd)(ibv_context*) = nullptr;
  int (*deallocPd)(ibv_pd*) = nullptr;
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int) = nullptr;
  int (*deregMr)(ibv_mr*) = nullptr;
  ibv_comp_channel* (*createCompChannel)(ibv_context*) = nullptr;
  int (*destroyCompChannel)(ibv_comp_channel*) = nullptr;
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroyCq)(ibv_cq*) = nullptr;
  int (*getCqEvent)(ibv_comp_channel*, ibv_cq**, void**) = nullptr;
  void (*ackCqEvents)(ibv_cq*, unsigned int) = nullptr;
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroyQp)(ibv_qp*) = nullptr;
  const char* (*portStateStr)(ibv_port_state) = nullptr;
};

TUTTI_PARAM_STRING(kIbLibrary, "TUTTI_IB_LIBRARY", nullptr, "NET", "libibverbs.so.1",
                   "libibverbs to dlopen: a file name searched as usual, or a path");

Api gApi;
Status gLoadStatus = internalError("ib: libibverbs not loaded yet");
std::once_flag gLoadOnce;

template <typename F>
bool resolve(F& fn, const char* name, const char* version, bool required, std::string& missing) {
  void* p = ::dlvsym(gApi.lib, name, version);
  if (p == nullptr) p = ::dlsym(gApi.lib, name);
  fn = reinterpret_cast<F>(p);
  if (p == nullptr && required) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", name);
  return p != nullptr;
}

void doLoad() {
  const std::string libName = kIbLibrary.get();
  const char* kLib = libName.c_str();
  gApi.lib = ::dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  if (gApi.lib == nullptr) {
    const char* err = ::dlerror();
    gLoadStatus = systemError("ib: cannot load {}: {}", kLib, err ? err : "unknown error");
    return;
  }
  std::string missing;
  constexpr const char* v = "IBVERBS_1.1";
  resolve(gApi.getDeviceList, "ibv_get_device_list", v, true, missing);
  resolve(gApi.freeDeviceList, "ibv_free_device_list", v, true, missing);
  resolve(gApi.getDeviceName, "ibv_get_device_name", v, true, missing);
  resolve(gApi.openDevice, "ibv_open_device", v, true, missing);
  resolve(gApi.closeDevice, "ibv_close_device", v, true, missing);
  resolve(gApi.queryDevice, "ibv_query_device", v, true, missing);
  resolve(gApi.queryPortCompat, "ibv_query_port", v, true, missing);
  resolve(gApi.queryGid, "ibv_query_gid", v, true, missing);
  resolve(gApi.queryGidTable, "_ibv_query_gid_table", "IBVERBS_1.11", false, missing);
  resolve(gApi.allocPd, "ibv_alloc_pd", v, true, missing);
  resolve(gApi.deallocPd, "ibv_dealloc_pd", v, true, missing);
  resolve(gApi.regMr, "ibv_reg_mr", v, true, missing);
  resolve(gApi.deregMr, "ibv_dereg_mr", v, true, missing);
  resolve(gApi.createCompChannel, "ibv_create_comp_channel", "IBVERBS_1.0", true, missing);
  resolve(gApi.destroyCompChannel, "ibv_destroy_comp_channel", "IBVERBS_1.0", true, missing);
  resolve(gApi.createCq, "ibv_create_cq", v, true, missing);
  resolve(gApi.destroyCq, "ibv_destroy_cq", v, true, missing);
  resolve(gApi.getCqEvent, "ibv_get_cq_event", v, true, missing);
  resolve(gApi.ackCqEvents, "ibv_ack_cq_events", v, true, missing);
  resolve(gApi.createQp, "ibv_create_qp", v, true, missing);
  resolve(gApi.modifyQp, "ibv_modify_qp", v, true, missing);
  resolve(gApi.destroyQp, "ibv_destroy_qp", v, true, missing);
  resolve(gApi.portStateStr, "ibv_port_state_str", v, true, missing);
  if (!missing.empty()) {
    gLoadStatus = systemError("ib: {} lacks {}", kLib, missing);
    ::dlclose(gApi.lib);
    gApi = Api{};
    return;
  }
  gLoadStatus = Status::ok();
}

std::string err(int e) { return errnoString(e); }

/// ibv_query_port without the header's inline wrapper (it calls the exported compat symbol
/// directly, which we only have through the table).
int queryPortRaw(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  verbs_context* vctx = verbs_get_ctx(ctx);
  if (vctx != nullptr && vctx->sz >= sizeof(*vctx) - offsetof(verbs_context, query_port) &&
      vctx->query_port != nullptr) {
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
  }
  std::memset(attr, 0, sizeof(*attr));
  return gApi.queryPortCompat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

int speedMbps(const ibv_port_attr& a) {
  // active_speed codes (ibv_query_port(3)) in Mb/s per lane; active_width codes in lanes.
  int lane = 0;
  switch (a.active_speed) {
    case 1:
      lane = 2500;
      break;
    case 2:
      lane = 5000;
      break;
    case 4:
    case 8:
      lane = 10000;
      break;
    case 16:
      lane = 14000;
      break;
    case 32:
      lane = 25000;
      break;
    case 64:
      lane = 50000;
      break;
    case 128:
      lane = 100000;
      break;
    default:
      break;
  }
  int lanes = 0;
  switch (a.active_width) {
    case 1:
      lanes = 1;
      break;
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    case 16:
      lanes = 2;
      break;
    default:
      break;
  }
  return lane * lanes;
}

PortInfo toPortInfo(int port, const ibv_port_attr& a) {
  PortInfo p;
  p.port = port;
  p.active = a.state == IBV_PORT_ACTIVE;
  p.state = gApi.portStateStr ? gApi.portStateStr(a.state) : std::to_string(a.state);
  p.linkLayer = a.link_layer == IBV_LINK_LAYER_ETHERNET     ? LinkLayer::kEthernet
                : a.link_layer == IBV_LINK_LAYER_INFINIBAND ? LinkLayer::kInfiniBand
                                                            : LinkLayer::kUnspecified;
  // IBV_LINK_LAYER_UNSPECIFIED is reported by old drivers for IB ports.
  if (a.link_layer == IBV_LINK_LAYER_UNSPECIFIED) p.linkLayer = LinkLayer::kInfiniBand;
  p.lid = a.lid;
  p.activeMtu = static_cast<uint8_t>(a.active_mtu);
  p.gidTableLen = a.gid_tbl_len;
  p.speedMbps = speedMbps(a);
  return p;
}

/// GID type from sysfs, for libraries without _ibv_query_gid_table.
GidType sysfsGidType(const std::string& dev, int port, int index) {
  std::ifstream f(
      fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/types/{}", dev, port, index));
  std::string line;
  if (!std::getline(f, line)) return GidType::kUnknown;
  if (line.find("RoCE v2") != std::string::npos) return GidType::kRoceV2;
  if (line.find("RoCE") != std::string::npos) return GidType::kRoceV1;
  if (line.find("IB") != std::string::npos) return GidType::kIb;
  return GidType::kUnknown;
}

GidType fromVerbsGidType(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_IB:
      return GidType::kIb;
    case IBV_GID_TYPE_ROCE_V1:
      return GidType::kRoceV1;
    case IBV_GID_TYPE_ROCE_V2:
      return GidType::kRoceV2;
    default:
      return GidType::kUnknown;
  }
}

}  // namespace

Status load() {
  std::call_once(gLoadOnce, doLoad);
  return gLoadStatus;
}

Result<std::vector<DeviceInfo>> listDevices() {
  TUTTI_TRY(load());
  int n = 0;
  ibv_device** list = gApi.getDeviceList(&n);
  if (list == nullptr) {
    const int e = errno;
    // ENOSYS: the kernel has no RDMA support (no uverbs); that just means no device.
    if (e == ENOSYS) return std::vector<DeviceInfo>{};
    return systemError("ib: ibv_get_device_list failed: {}", err(e));
  }
  std::vector<DeviceInfo> out;
  for (int d = 0; d < n; ++d) {
    DeviceInfo info;
    info.name = gApi.getDeviceName(list[d]);
    ibv_context* ctx = gApi.openDevice(list[d]);
    if (ctx == nullptr) {
      TUTTI_LOG_INFO(Subsys::kNet, "ib: cannot open {}: {}", info.name, err(errno));
      continue;
    }
    ibv_device_attr attr{};
    if (gApi.queryDevice(ctx, &attr) == 0) {
      for (int port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (queryPortRaw(ctx, static_cast<uint8_t>(port), &pa) == 0)
          info.ports.push_back(toPortInfo(port, pa));
      }
    }
    gApi.closeDevice(ctx);
    out.push_back(std::move(info));
  }
  gApi.freeDeviceList(list);
  return out;
}

// ---- Device ----

Result<std::shared_ptr<Device>> Device::open(const std::string& name) {
  TUTTI_TRY(load());
  int n = 0;
  ibv_device** list = gApi.getDeviceList(&n);
  if (list == nullptr) return systemError("ib: ibv_get_device_list failed: {}", err(errno));
  std::shared_ptr<Device> dev(new Device());
  dev->name_ = name;
  for (int d = 0; d < n && dev->context_ == nullptr; ++d) {
    if (name != gApi.getDeviceName(list[d])) continue;
    dev->context_ = gApi.openDevice(list[d]);
    if (dev->context_ == nullptr) {
      const int e = errno;
      gApi.freeDeviceList(list);
      return systemError("ib: ibv_open_device({}) failed: {}", name, err(e));
    }
  }
  gApi.freeDeviceList(list);
  if (dev->context_ == nullptr) return systemError("ib: device {} disappeared", name);
  dev->pd_ = gApi.allocPd(static_cast<ibv_context*>(dev->context_));
  if (dev->pd_ == nullptr)
    return systemError("ib: ibv_alloc_pd on {} failed: {}", name, err(errno));
  return dev;
}

Device::~Device() {
  if (pd_ != nullptr) gApi.deallocPd(static_cast<ibv_pd*>(pd_));
  if (context_ != nullptr) gApi.closeDevice(static_cast<ibv_context*>(context_));
}

Result<PortInfo> Device::queryPort(int port) const {
  ibv_port_attr pa{};
  if (int e = queryPortRaw(static_cast<ibv_context*>(context_), static_cast<uint8_t>(port), &pa))
    return systemError("ib: ibv_query_port({}:{}) failed: {}", name_, port, err(e));
  return toPortInfo(port, pa);
}

Result<std::vector<GidEntry>> Device::queryGids(int port, int tableLen) const {
  auto* ctx = static_cast<ibv_context*>(context_);
  std::vector<GidEntry> out;
  if (gApi.queryGidTable != nullptr) {
    // Every valid entry of every port; far fewer than 16 ports x tableLen on real devices.
    std::vector<ibv_gid_entry> all(static_cast<size_t>(std::max(tableLen, 1)) * 16);
    const ssize_t n = gApi.queryGidTable(ctx, all.data(), all.size(), 0, sizeof(ibv_gid_entry));
    if (n >= 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (static_cast<int>(all[i].port_num) != port) continue;
        GidEntry e;
        e.index = static_cast<int>(all[i].gid_index);
        std::memcpy(e.gid.raw.data(), all[i].gid.raw, 16);
        e.type = fromVerbsGidType(all[i].gid_type);
        if (!e.gid.isZero()) out.push_back(e);
      }
      return out;
    }
    // Fall through to the per-entry path (e.g. EOPNOTSUPP from an old kernel).
  }
  for (int i = 0; i < tableLen; ++i) {
    ibv_gid g{};
    if (gApi.queryGid(ctx, static_cast<uint8_t>(port), i, &g) != 0) continue;
    GidEntry e;
    e.index = i;
    std::memcpy(e.gid.raw.data(), g.raw, 16);
    if (e.gid.isZero()) continue;
    e.type = sysfsGidType(name_, port, i);
    out.push_back(e);
  }
  return out;
}

Result<MemoryRegion> Device::registerMemory(void* addr, size_t bytes, bool remoteWrite) {
  const int access = remoteWrite ? (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : 0;
  ibv_mr* mr = gApi.regMr(static_cast<ibv_pd*>(pd_), addr, bytes, access);
  if (mr == nullptr) {
    const int e = errno;
    return systemError("ib: ibv_reg_mr({} bytes at {}) on {} failed: {}{}", bytes, addr, name_,
                       err(e),
                       e == ENOMEM ? " (is the locked-memory limit too low? see ulimit -l)" : "");
  }
  return MemoryRegion{mr, mr->lkey, mr->rkey};
}

void Device::deregister(const MemoryRegion& mr) {
  if (mr.handle == nullptr) return;
  if (int e = gApi.deregMr(static_cast<ibv_mr*>(mr.handle)))
    TUTTI_LOG_WARN(Subsys::kNet, "ib: ibv_dereg_mr on {} failed: {}", name_, err(e));
}

// ---- CompletionQueue ----

Result<std::unique_ptr<CompletionQueue>> CompletionQueue::create(std::shared_ptr<Device> dev,
                                                                 int depth) {
  std::unique_ptr<CompletionQueue> cq(new CompletionQueue());
  cq->dev_ = dev;
  auto* ctx = static_cast<ibv_context*>(dev->context());
  auto* ch = gApi.createCompChannel(ctx);
  if (ch == nullptr)
    return systemError("ib: ibv_create_comp_channel on {} failed: {}", dev->name(), err(errno));
  cq->channel_ = ch;
  const int flags = ::fcntl(ch->fd, F_GETFL);
  if (flags < 0 || ::fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return systemError("ib: fcntl(O_NONBLOCK) on a completion channel failed: {}", err(errno));
  cq->cq_ = gApi.createCq(ctx, depth, nullptr, ch, 0);
  if (cq->cq_ == nullptr)
    return systemError("ib: ibv_create_cq(depth {}) on {} failed: {}", depth, dev->name(),
                       err(errno));
  return cq;
}

CompletionQueue::~CompletionQueue() {
  if (cq_ != nullptr) {
    consumeEvents();
    gApi.destroyCq(static_cast<ibv_cq*>(cq_));
  }
  if (channel_ != nullptr) gApi.destroyCompChannel(static_cast<ibv_comp_channel*>(channel_));
}

Result<size_t> CompletionQueue::poll(std::span<WireCompletion> out) {
  ibv_wc wc[32];
  const int want = static_cast<int>(std::min<size_t>(out.size(), 32));
  const int n = ibv_poll_cq(static_cast<ibv_cq*>(cq_), want, wc);
  if (n < 0) return systemError("ib: ibv_poll_cq on {} failed ({})", dev_->name(), n);
  for (int i = 0; i < n; ++i) {
    WireCompletion& c = out[i];
    c.wrId = wc[i].wr_id;
    c.status = static_cast<int>(wc[i].status);
    c.vendorErr = wc[i].vendor_err;
    // Only wr_id, status, qp_num and vendor_err are valid on an error completion.
    c.isRecv = wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV) != 0;
    c.imm = c.isRecv && (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
  }
  return static_cast<size_t>(n);
}

int CompletionQueue::fd() const { return static_cast<ibv_comp_channel*>(channel_)->fd; }

Status CompletionQueue::arm() {
  if (int e = ibv_req_notify_cq(static_cast<ibv_cq*>(cq_), 0))
    return systemError("ib: ibv_req_notify_cq on {} failed: {}", dev_->name(), err(e));
  return Status::ok();
}

int CompletionQueue::consumeEvents() {
  int n = 0;
  ibv_cq* evCq = nullptr;
  void* evCtx = nullptr;
  while (gApi.getCqEvent(static_cast<ibv_comp_channel*>(channel_), &evCq, &evCtx) == 0) {
    gApi.ackCqEvents(evCq, 1);
    ++n;
  }
  return n;
}

// ---- QueuePair ----

Result<std::unique_ptr<QueuePair>> QueuePair::createRc(std::shared_ptr<Device> dev,
                                                       CompletionQueue& cq, uint32_t sendDepth,
                                                       uint32_t recvDepth) {
  std::unique_ptr<QueuePair> qp(new QueuePair());
  qp->dev_ = dev;
  ibv_qp_init_attr init{};
  init.send_cq = static_cast<ibv_cq*>(cq.handle());
  init.recv_cq = static_cast<ibv_cq*>(cq.handle());
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = sendDepth;
  init.cap.max_recv_wr = recvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = 0;
  auto* q = gApi.createQp(static_cast<ibv_pd*>(dev->pd()), &init);
  if (q == nullptr)
    return systemError("ib: ibv_create_qp(RC, {} send, {} recv) on {} failed: {}", sendDepth,
                       recvDepth, dev->name(), err(errno));
  qp->qp_ = q;
  qp->qpn_ = q->qp_num;
  return qp;
}

QueuePair::~QueuePair() {
  if (qp_ != nullptr) gApi.destroyQp(static_cast<ibv_qp*>(qp_));
}

Status QueuePair::toInit(int port) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int e = gApi.modifyQp(static_cast<ibv_qp*>(qp_), &a,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return systemError("ib: ibv_modify_qp(INIT) of QP {:#x} on {} failed: {}", qpn_, dev_->name(),
                       err(e));
  return Status::ok();
}

Status QueuePair::connect(const RemoteAddress& remote, uint32_t localPsn, const PathParams& path) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(path.mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;  // 0.64 ms; RNR cannot happen by design (fifo_channel.h)
  a.ah_attr.is_global = path.useGrh ? 1 : 0;
  if (path.useGrh) {
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.raw.data(), 16);
    a.ah_attr.grh.flow_label = 0;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(path.gidIndex);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = static_cast<uint8_t>(path.trafficClass);
  }
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.sl = static_cast<uint8_t>(path.serviceLevel);
  a.ah_attr.src_path_bits = 0;
  a.ah_attr.port_num = static_cast<uint8_t>(path.port);
  if (int e = gApi.modifyQp(static_cast<ibv_qp*>(qp_), &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return systemError(
        "ib: ibv_modify_qp(RTR) of QP {:#x} on {} towards QP {:#x} (lid {}, gid {}) failed: {}",
        qpn_, dev_->name(), remote.qpn, remote.lid, remote.gid.toString(), err(e));
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = static_cast<uint8_t>(path.timeout);
  r.retry_cnt = static_cast<uint8_t>(path.retryCnt);
  r.rnr_retry = 7;  // infinite
  r.sq_psn = localPsn;
  r.max_rd_atomic = 1;
  if (int e = gApi.modifyQp(static_cast<ibv_qp*>(qp_), &r,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return systemError("ib: ibv_modify_qp(RTS) of QP {:#x} on {} failed: {}", qpn_, dev_->name(),
                       err(e));
  return Status::ok();
}

Status QueuePair::postWrite(uint64_t wrId, const void* src, uint32_t bytes, uint32_t lkey,
                            uint64_t remoteAddr, uint32_t rkey, uint32_t imm) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(src);
  sge.length = bytes;
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = bytes > 0 ? &sge : nullptr;
  wr.num_sge = bytes > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(static_cast<ibv_qp*>(qp_), &wr, &bad))
    return systemError("ib: ibv_post_send on QP {:#x} ({}) failed: {}", qpn_, dev_->name(), err(e));
  return Status::ok();
}

Status QueuePair::postProbe(uint64_t wrId, uint64_t remoteAddr, uint32_t rkey) {
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = nullptr;
  wr.num_sge = 0;  // zero-length: some providers require num_sge 0 then
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(static_cast<ibv_qp*>(qp_), &wr, &bad))
    return systemError("ib: ibv_post_send (probe) on QP {:#x} ({}) failed: {}", qpn_, dev_->name(),
                       err(e));
  return Status::ok();
}

Status QueuePair::postRecv(uint64_t wrId) {
  ibv_recv_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = nullptr;
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  if (int e = ibv_post_recv(static_cast<ibv_qp*>(qp_), &wr, &bad))
    return systemError("ib: ibv_post_recv on QP {:#x} ({}) failed: {}", qpn_, dev_->name(), err(e));
  return Status::ok();
}

}  // namespace tutti::transport::ib::verbs
