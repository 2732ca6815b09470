// File: core/launcher_env.cc
// Launcher detection. The root address: TUTTI_COMM_ID / NCCL_COMM_ID, else MASTER_ADDR with port
// MASTER_PORT+1 (torchrun owns MASTER_PORT), else the job's first host (127.0.0.1 when every rank
// is local) with a port derived from the job id, as JAX does. The secret: TUTTI_COMM_SECRET (hex),
// else derived from the job id (no protection then: document it).
#include "core/launcher_env.h"

#include <functional>

#include "base/env.h"
#include "base/hash.h"

namespace tutti {

namespace {

Result<int> intVar(const char* name) {
  auto v = env::get({name});
  if (!v) return invalidUsage("{} is not set", name);
  auto n = env::parseInt(*v);
  if (!n || *n < 0 || *n > (1 << 30))
    return invalidArgument("launcher variable {} is not a valid integer (value='{}')", name, *v);
  return static_cast<int>(*n);
}
int optInt(const char* name) {
  auto v = env::get({name});
  if (!v) return -1;
  auto n = env::parseInt(*v);
  return n ? static_cast<int>(*n) : -1;
}

// Open MPI 4: OMPI_MCA_orte_hnp_uri="<jobid>.<vpid>;tcp://10.0.0.1,172.17.0.1:45678;..."
std::string ompiFirstHost() {
  auto uri = env::get({"OMPI_MCA_orte_hnp_uri", "PMIX_SERVER_URI41", "PMIX_SERVER_URI4"});
  if (!uri) return "";
  auto p = uri->find("tcp://");
  if (p == std::string::npos) p = uri->find("tcp4://");
  if (p == std::string::npos) return "";
  p = uri->find("//", p) + 2;
  auto end = uri->find_first_of(",:;", p);
  return uri->substr(p, end == std::string::npos ? std::string::npos : end - p);
}

// Slurm: first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST ("node[01-04,7],gpu2" -> node01).
std::string slurmFirstHost() {
  auto list = env::get({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list || list->empty()) return "";
  const std::string& s = *list;
  auto bracket = s.find('['), comma = s.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return s.substr(0, comma);
  auto first = s.find_first_of(",-]", bracket + 1);
  return s.substr(0, bracket) + s.substr(bracket + 1, first - bracket - 1);
}

}  // namespace

Result<LaunchEnv> readLaunchEnv() {
  LaunchEnv e;
  std::string jobKey;
  std::string firstHost;
  if (env::get({"TUTTI_RANK"})) {
    e.launcher = "tutti-run";
    TUTTI_TRY_ASSIGN(e.rank, intVar("TUTTI_RANK"));
    TUTTI_TRY_ASSIGN(e.nranks, intVar("TUTTI_NRANKS"));
    e.localRank = optInt("TUTTI_LOCAL_RANK");
    e.localSize = optInt("TUTTI_LOCAL_SIZE");
  } else if (env::get({"RANK"}) && env::get({"WORLD_SIZE"})) {
    e.launcher = "torchrun";
    TUTTI_TRY_ASSIGN(e.rank, intVar("RANK"));
    TUTTI_TRY_ASSIGN(e.nranks, intVar("WORLD_SIZE"));
    e.localRank = optInt("LOCAL_RANK");
    e.localSize = optInt("LOCAL_WORLD_SIZE");
    jobKey = env::get({"TORCHELASTIC_RUN_ID"}).value_or("torchrun");
  } else if (env::get({"OMPI_COMM_WORLD_RANK"})) {
    e.launcher = "openmpi";
    TUTTI_TRY_ASSIGN(e.rank, intVar("OMPI_COMM_WORLD_RANK"));
    TUTTI_TRY_ASSIGN(e.nranks, intVar("OMPI_COMM_WORLD_SIZE"));
    e.localRank = optInt("OMPI_COMM_WORLD_LOCAL_RANK");
    e.localSize = optInt("OMPI_COMM_WORLD_LOCAL_SIZE");
    jobKey = env::get({"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri", "PMIX_NAMESPACE"})
                 .value_or("openmpi");
    firstHost = ompiFirstHost();
  } else if (env::get({"PMI_RANK"})) {
    e.launcher = "pmi";
    TUTTI_TRY_ASSIGN(e.rank, intVar("PMI_RANK"));
    TUTTI_TRY_ASSIGN(e.nranks, intVar("PMI_SIZE"));
    e.localRank = optInt("MPI_LOCALRANKID");
    e.localSize = optInt("MPI_LOCALNRANKS");
    jobKey = env::get({"PMI_KVSNAME", "PMI_ID"}).value_or("pmi") +
             env::get({"PMI_PORT"}).value_or("");
    firstHost = env::get({"PMI_PORT"}).value_or("");
    if (auto c = firstHost.find(':'); c != std::string::npos) firstHost.resize(c);
  } else if (env::get({"SLURM_PROCID"}) && env::get({"SLURM_NTASKS"})) {
    e.launcher = "slurm";
    TUTTI_TRY_ASSIGN(e.rank, intVar("SLURM_PROCID"));
    TUTTI_TRY_ASSIGN(e.nranks, intVar("SLURM_NTASKS"));
    e.localRank = optInt("SLURM_LOCALID");
    e.localSize = optInt("SLURM_NTASKS_PER_NODE");
    jobKey = env::get({"SLURM_JOB_ID"}).value_or("slurm") + "." +
             env::get({"SLURM_STEP_ID"}).value_or("0");
    firstHost = slurmFirstHost();
  } else {
    return invalidUsage(
        "no launcher environment found: looked for TUTTI_RANK/TUTTI_NRANKS (tutti-run), "
        "RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PMI_RANK/PMI_SIZE "
        "(MPICH Hydra), SLURM_PROCID/SLURM_NTASKS (Slurm)");
  }
  if (e.nranks < 1 || e.rank >= e.nranks)
    return invalidArgument("{}: rank {} is outside [0, {}) ", e.launcher, e.rank, e.nranks);

  if (auto id = env::get({"TUTTI_COMM_ID", "NCCL_COMM_ID"}); id && !id->empty()) {
    e.rootAddress = *id;
    e.rootSource = env::get({"TUTTI_COMM_ID"}) ? "TUTTI_COMM_ID" : "NCCL_COMM_ID";
  } else if (auto master = env::get({"MASTER_ADDR"}); master && !master->empty()) {
    int port = optInt("MASTER_PORT");
    if (port <= 0) port = 29500;
    e.rootAddress = fmt::format("{}:{}", *master, port + 1);
    e.rootSource = "MASTER_ADDR:MASTER_PORT+1";
  } else {
    const bool allLocal = e.localSize > 0 && e.localSize == e.nranks;
    std::string host = allLocal ? "127.0.0.1" : firstHost;
    if (host.empty())
      return invalidUsage("{}: cannot tell where rank 0 runs: set TUTTI_COMM_ID=host:port (the "
                          "host of rank 0 and a free port)",
                          e.launcher);
    const int port = 20000 + static_cast<int>(fnv1a(jobKey) % 40000);
    e.rootAddress = fmt::format("{}:{}", host, port);
    e.rootSource = fmt::format("{} job '{}'", e.launcher, jobKey);
  }

  if (auto s = env::get({"TUTTI_COMM_SECRET"}); s && !s->empty()) {
    char* end = nullptr;
    e.secret = std::strtoull(s->c_str(), &end, 16);
    if (*end != '\0')
      return invalidArgument("TUTTI_COMM_SECRET must be hexadecimal (value='{}')", *s);
  } else {
    e.secret = fnv1a("tutti:" + jobKey + ":" + e.rootAddress);
  }
  return e;
}

}  // namespace tutti
