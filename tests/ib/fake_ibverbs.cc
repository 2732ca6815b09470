// File: tests/ib/fake_ibverbs.cc
// A fake libibverbs.so.1 for in-process tests of transports/ib/verbs.cc and ib_transport.cc:
// one device "fakeib0" with one active port (InfiniBand, or RoCE when FAKE_IBV_LINK=eth, with a
// GID table of link-local v1/v2 and IPv4-mapped v1/v2 entries), and RC queue pairs that connect
// to queue pairs *of the same process*. RDMA writes are executed synchronously inside
// ibv_post_send: the remote range is checked against the rkey's registration (remote write
// access), the local range against the lkey's, one posted receive is consumed for writes with
// immediate (none: an RNR error completion), and completions go to the CQs, with an event on the
// completion channel when the CQ is armed. Writes to a destroyed queue pair fail with
// IBV_WC_RETRY_EXC_ERR, as a dead peer does. The queue-pair state machine is enforced (RESET ->
// INIT -> RTR -> RTS with the attribute masks the verbs man pages require), and the data-path
// functions are reached only through context->ops, as with a real provider.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>

// verbs.h wraps these two in macros; the fake defines the exported symbols themselves.
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

struct CqState {
  std::deque<ibv_wc> q;
  bool armed = false;
  int depth = 0;
};
struct QpState {
  std::deque<uint64_t> recvs;
  uint32_t maxSend = 0, maxRecv = 0;
  uint32_t destQpn = 0;
  uint8_t port = 0;
  int access = 0;
  bool grh = false;
  uint8_t sgid = 0;
  ibv_gid dgid{};
};
struct MrState {
  uintptr_t addr;
  size_t len;
  int access;
  ibv_pd* pd;
};

std::mutex gMu;
ibv_device gDevice;
std::map<ibv_cq*, CqState> gCqs;
std::map<ibv_qp*, QpState> gQps;
std::map<uint32_t, ibv_qp*> gQpByNum;
std::map<uint32_t, MrState> gMrs;  // by key (lkey == rkey here)
uint32_t gNextQpn = 0x100, gNextKey = 0x1000;
bool gEthernet = false;

ibv_gid gidEntry(int index) {
  ibv_gid g{};
  if (!gEthernet) {  // IB: subnet prefix fe80::, GUID
    g.raw[0] = 0xfe;
    g.raw[1] = 0x80;
    g.raw[15] = 0x42;
    return g;
  }
  if (index < 2) {
    g.raw[0] = 0xfe;
    g.raw[1] = 0x80;
    g.raw[15] = 0x54;
  } else if (index < 4) {
    g.raw[10] = g.raw[11] = 0xff;
    g.raw[12] = 10;
    g.raw[15] = 7;
  }
  return g;
}

void push(ibv_cq* cq, const ibv_wc& wc) {
  CqState& s = gCqs.at(cq);
  s.q.push_back(wc);
  if (s.armed && cq->channel != nullptr) {
    s.armed = false;
    const char c = 1;
    (void)!::write(cq->channel->refcnt, &c, 1);  // the pipe's write end
  }
}

bool covers(uint32_t key, uintptr_t addr, size_t len, int needAccess, ibv_pd* pd) {
  auto it = gMrs.find(key);
  if (it == gMrs.end() || it->second.pd != pd) return false;
  const MrState& m = it->second;
  return addr >= m.addr && addr + len <= m.addr + m.len && (m.access & needAccess) == needAccess;
}

int fakePostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(gMu);
  for (; wr != nullptr; wr = wr->next) {
    if (qp->state == IBV_QPS_ERR) {  // a queue pair in error flushes what is posted
      ibv_wc f{};
      f.wr_id = wr->wr_id;
      f.status = IBV_WC_WR_FLUSH_ERR;
      f.qp_num = qp->qp_num;
      push(qp->send_cq, f);
      continue;
    }
    if (qp->state != IBV_QPS_RTS) {
      *bad = wr;
      return EINVAL;
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
      *bad = wr;
      return EINVAL;
    }
    size_t len = 0;
    for (int i = 0; i < wr->num_sge; ++i) len += wr->sg_list[i].length;
    ibv_wc done{};
    done.wr_id = wr->wr_id;
    done.opcode = IBV_WC_RDMA_WRITE;
    done.qp_num = qp->qp_num;
    auto status = IBV_WC_SUCCESS;
    for (int i = 0; i < wr->num_sge && status == IBV_WC_SUCCESS; ++i) {
      if (!covers(wr->sg_list[i].lkey, wr->sg_list[i].addr, wr->sg_list[i].length, 0, qp->pd))
        status = IBV_WC_LOC_PROT_ERR;
    }
    auto peerIt = gQpByNum.find(gQps.at(qp).destQpn);
    ibv_qp* peer = peerIt == gQpByNum.end() ? nullptr : peerIt->second;
    if (status == IBV_WC_SUCCESS && (peer == nullptr || peer->state < IBV_QPS_RTR)) {
      status = IBV_WC_RETRY_EXC_ERR;  // nobody answers
    }
    if (status == IBV_WC_SUCCESS && len > 0 &&
        !covers(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_WRITE,
                peer->pd)) {
      status = IBV_WC_REM_ACCESS_ERR;
    }
    const bool imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (status == IBV_WC_SUCCESS && imm && gQps.at(peer).recvs.empty()) {
      status = IBV_WC_RNR_RETRY_EXC_ERR;
    }
    if (status == IBV_WC_SUCCESS) {
      auto* dst = reinterpret_cast<char*>(wr->wr.rdma.remote_addr);
      for (int i = 0; i < wr->num_sge; ++i) {
        std::memcpy(dst, reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
        dst += wr->sg_list[i].length;
      }
      if (imm) {
        ibv_wc rc{};
        rc.wr_id = gQps.at(peer).recvs.front();
        gQps.at(peer).recvs.pop_front();
        rc.status = IBV_WC_SUCCESS;
        rc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        rc.byte_len = static_cast<uint32_t>(len);
        rc.imm_data = wr->imm_data;
        rc.wc_flags = IBV_WC_WITH_IMM;
        rc.qp_num = peer->qp_num;
        push(peer->recv_cq, rc);
      }
    }
    done.status = status;
    if (status != IBV_WC_SUCCESS) {
      done.vendor_err = 0x81;
      done.opcode = static_cast<ibv_wc_opcode>(0xff);  // undefined on errors
      qp->state = IBV_QPS_ERR;
    }
    if ((wr->send_flags & IBV_SEND_SIGNALED) || status != IBV_WC_SUCCESS) push(qp->send_cq, done);
  }
  return 0;
}

int fakePostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(gMu);
  for (; wr != nullptr; wr = wr->next) {
    QpState& s = gQps.at(qp);
    if (qp->state == IBV_QPS_RESET || s.recvs.size() >= s.maxRecv) {
      *bad = wr;
      return ENOMEM;
    }
    s.recvs.push_back(wr->wr_id);
  }
  return 0;
}

int fakePollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(gMu);
  CqState& s = gCqs.at(cq);
  int k = 0;
  while (k < n && !s.q.empty()) {
    wc[k++] = s.q.front();
    s.q.pop_front();
  }
  return k;
}

int fakeReqNotify(ibv_cq* cq, int) {
  std::lock_guard<std::mutex> lock(gMu);
  gCqs.at(cq).armed = true;
  return 0;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* n) {
  const char* link = std::getenv("FAKE_IBV_LINK");
  gEthernet = link != nullptr && std::string(link) == "eth";
  std::strcpy(gDevice.name, "fakeib0");
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  list[0] = &gDevice;
  if (n) *n = 1;
  return list;
}
void ibv_free_device_list(ibv_device** list) { std::free(list); }
const char* ibv_get_device_name(ibv_device* d) { return d->name; }

ibv_context* ibv_open_device(ibv_device* d) {
  auto* ctx = new ibv_context{};
  ctx->device = d;
  ctx->ops.poll_cq = fakePollCq;
  ctx->ops.req_notify_cq = fakeReqNotify;
  ctx->ops.post_send = fakePostSend;
  ctx->ops.post_recv = fakePostRecv;
  ctx->abi_compat = nullptr;  // not an extended verbs_context: the compat query_port is used
  return ctx;
}
int ibv_close_device(ibv_context* ctx) {
  delete ctx;
  return 0;
}
int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  std::memset(a, 0, sizeof(*a));
  a->phys_port_cnt = 1;
  a->max_qp = 1024;
  return 0;
}
// The exported symbol takes the compat struct; callers pass a full ibv_port_attr.
int ibv_query_port(ibv_context*, uint8_t port, _compat_ibv_port_attr* compat) {
  auto* a = reinterpret_cast<ibv_port_attr*>(compat);
  if (port != 1) return EINVAL;
  a->state = IBV_PORT_ACTIVE;
  a->link_layer = gEthernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  a->lid = gEthernet ? 0 : 7;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = 8;
  a->active_speed = 32;  // 25 Gb/s per lane
  a->active_width = 2;   // 4 lanes
  return 0;
}
int ibv_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* g) {
  if (port != 1 || index < 0 || index >= 8) return EINVAL;
  *g = gidEntry(index);
  return 0;
}
ssize_t _ibv_query_gid_table(ibv_context*, ibv_gid_entry* e, size_t max, uint32_t, size_t) {
  size_t n = 0;
  for (int i = 0; i < 8 && n < max; ++i) {
    const ibv_gid g = gidEntry(i);
    bool zero = true;
    for (uint8_t b : g.raw) zero = zero && b == 0;
    if (zero) continue;
    e[n] = ibv_gid_entry{};
    e[n].gid = g;
    e[n].gid_index = static_cast<uint32_t>(i);
    e[n].port_num = 1;
    e[n].gid_type = !gEthernet   ? IBV_GID_TYPE_IB
                    : i % 2 == 0 ? IBV_GID_TYPE_ROCE_V1
                                 : IBV_GID_TYPE_ROCE_V2;
    ++n;
  }
  return static_cast<ssize_t>(n);
}
const char* ibv_port_state_str(ibv_port_state s) {
  return s == IBV_PORT_ACTIVE ? "PORT_ACTIVE" : "PORT_DOWN";
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto* pd = new ibv_pd{};
  pd->context = ctx;
  return pd;
}
int ibv_dealloc_pd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(gMu);
  for (auto& [key, m] : gMrs)
    if (m.pd == pd) return EBUSY;
  for (auto& [qp, s] : gQps)
    if (qp->pd == pd) return EBUSY;
  delete pd;
  return 0;
}
ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;  // ibv_reg_mr(3): remote write requires local write
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(gMu);
  auto* mr = new ibv_mr{};
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = gNextKey++;
  gMrs[mr->lkey] = MrState{reinterpret_cast<uintptr_t>(addr), len, access, pd};
  return mr;
}
int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(gMu);
  if (gMrs.erase(mr->lkey) != 1) return EINVAL;
  delete mr;
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  auto* ch = new ibv_comp_channel{};
  ch->context = ctx;
  ch->fd = fds[0];
  ch->refcnt = fds[1];  // the write end, kept here for the fake
  return ch;
}
int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  ::close(ch->fd);
  ::close(ch->refcnt);
  delete ch;
  return 0;
}
ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void*, ibv_comp_channel* ch, int) {
  std::lock_guard<std::mutex> lock(gMu);
  auto* cq = new ibv_cq{};
  cq->context = ctx;
  cq->channel = ch;
  cq->cqe = cqe;
  gCqs[cq].depth = cqe;
  return cq;
}
int ibv_destroy_cq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(gMu);
  for (auto& [qp, s] : gQps)
    if (qp->send_cq == cq || qp->recv_cq == cq) return EBUSY;
  gCqs.erase(cq);
  delete cq;
  return 0;
}
int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** ctx) {
  char c;
  if (::read(ch->fd, &c, 1) != 1) return -1;  // EAGAIN on the non-blocking fd
  std::lock_guard<std::mutex> lock(gMu);
  for (auto& [q, s] : gCqs) {
    if (q->channel == ch) {
      *cq = q;
      *ctx = q->cq_context;
      return 0;
    }
  }
  return -1;
}
void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (a->qp_type != IBV_QPT_RC || a->send_cq == nullptr || a->recv_cq == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(gMu);
  auto* qp = new ibv_qp{};
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = a->send_cq;
  qp->recv_cq = a->recv_cq;
  qp->qp_num = gNextQpn++;
  qp->state = IBV_QPS_RESET;
  qp->qp_type = IBV_QPT_RC;
  QpState& s = gQps[qp];
  s.maxSend = a->cap.max_send_wr;
  s.maxRecv = a->cap.max_recv_wr;
  gQpByNum[qp->qp_num] = qp;
  return qp;
}
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::mutex> lock(gMu);
  QpState& s = gQps.at(qp);
  auto need = [&](int m) { return (mask & m) == m; };
  if (!need(IBV_QP_STATE)) return EINVAL;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (qp->state != IBV_QPS_RESET ||
          !need(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || a->port_num != 1)
        return EINVAL;
      s.port = a->port_num;
      s.access = a->qp_access_flags;
      break;
    case IBV_QPS_RTR:
      if (qp->state != IBV_QPS_INIT ||
          !need(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) ||
          a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096 || a->ah_attr.port_num != 1)
        return EINVAL;
      // RoCE needs a GRH whose source index names a non-empty entry; IB routes by LID.
      if (gEthernet) {
        if (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= 8) return EINVAL;
        const ibv_gid g = gidEntry(a->ah_attr.grh.sgid_index);
        bool zero = true;
        for (uint8_t b : g.raw) zero = zero && b == 0;
        if (zero) return EINVAL;
      } else if (a->ah_attr.dlid == 0) {
        return EINVAL;
      }
      s.destQpn = a->dest_qp_num;
      s.grh = a->ah_attr.is_global;
      s.dgid = a->ah_attr.grh.dgid;
      break;
    case IBV_QPS_RTS:
      if (qp->state != IBV_QPS_RTR ||
          !need(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                IBV_QP_MAX_QP_RD_ATOMIC) ||
          a->retry_cnt > 7 || a->rnr_retry > 7 || a->timeout > 31)
        return EINVAL;
      break;
    default:
      return EINVAL;
  }
  qp->state = a->qp_state;
  return 0;
}
int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(gMu);
  gQpByNum.erase(qp->qp_num);
  gQps.erase(qp);
  delete qp;
  return 0;
}

}  // extern "C"
