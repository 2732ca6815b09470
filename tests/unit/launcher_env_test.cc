// File: tests/unit/launcher_env_test.cc
// Launcher detection from the environment: tutti-run, torchrun, Open MPI, PMI and Slurm, their
// precedence, the root address rules and the error when no launcher is present.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <string>

#include "core/launcher_env.h"

namespace tutti {
namespace {

const char* const kAllVars[] = {
    "TUTTI_RANK", "TUTTI_NRANKS", "TUTTI_LOCAL_RANK", "TUTTI_LOCAL_SIZE", "TUTTI_COMM_ID",
    "TUTTI_COMM_SECRET", "NCCL_COMM_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid", "PMIX_SERVER_URI41", "PMIX_SERVER_URI4",
    "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", "PMI_PORT", "PMI_KVSNAME", "PMI_ID",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST", "SLURM_NODELIST"};

// Sets exactly `vars` among the launcher variables for the scope of the object.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* v : kAllVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* v : kAllVars) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

int portOf(const std::string& addr) { return std::stoi(addr.substr(addr.rfind(':') + 1)); }

}  // namespace

TEST_CASE("tutti-run variables come first and keep the given root", "[launcher_env]") {
  ScopedEnv env({{"TUTTI_RANK", "2"}, {"TUTTI_NRANKS", "4"}, {"TUTTI_LOCAL_RANK", "2"},
                 {"TUTTI_COMM_ID", "127.0.0.1:4567"}, {"TUTTI_COMM_SECRET", "00ff"},
                 {"RANK", "0"}, {"WORLD_SIZE", "9"}});
  auto e = readLaunchEnv();
  REQUIRE(e.isOk());
  CHECK(e->launcher == "tutti-run");
  CHECK(e->rank == 2);
  CHECK(e->nranks == 4);
  CHECK(e->localRank == 2);
  CHECK(e->rootAddress == "127.0.0.1:4567");
  CHECK(e->secret == 0xff);
}

TEST_CASE("torchrun: MASTER_ADDR with MASTER_PORT+1", "[launcher_env]") {
  ScopedEnv env({{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.1.2.3"},
                 {"MASTER_PORT", "29500"}});
  auto e = readLaunchEnv();
  REQUIRE(e.isOk());
  CHECK(e->launcher == "torchrun");
  CHECK(e->rank == 1);
  CHECK(e->nranks == 8);
  CHECK(e->localSize == 4);
  CHECK(e->rootAddress == "10.1.2.3:29501");
}

TEST_CASE("Open MPI: loopback when every rank is local, else the HNP's first host",
          "[launcher_env]") {
  std::map<std::string, std::string> vars = {
      {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
      {"OMPI_MCA_ess_base_jobid", "123456"},
      {"OMPI_MCA_orte_hnp_uri", "123456.0;tcp://10.0.0.7,172.17.0.1:45678"}};
  {
    ScopedEnv env(vars);
    auto e = readLaunchEnv();
    REQUIRE(e.isOk());
    CHECK(e->launcher == "openmpi");
    CHECK(e->rootAddress.rfind("127.0.0.1:", 0) == 0);
    CHECK(portOf(e->rootAddress) >= 20000);
    CHECK(portOf(e->rootAddress) < 60000);
    // Every rank derives the same address and secret from the same job.
    auto again = readLaunchEnv();
    CHECK(again->rootAddress == e->rootAddress);
    CHECK(again->secret == e->secret);
  }
  vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  {
    ScopedEnv env(vars);
    auto e = readLaunchEnv();
    REQUIRE(e.isOk());
    CHECK(e->rootAddress.rfind("10.0.0.7:", 0) == 0);
  }
}

TEST_CASE("Slurm: the first host of the step's node list", "[launcher_env]") {
  ScopedEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_NODELIST", "gpu[07-10,12],login1"}});
  auto e = readLaunchEnv();
  REQUIRE(e.isOk());
  CHECK(e->launcher == "slurm");
  CHECK(e->nranks == 16);
  CHECK(e->rootAddress.rfind("gpu07:", 0) == 0);
}

TEST_CASE("PMI (MPICH Hydra)", "[launcher_env]") {
  ScopedEnv env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"},
                 {"MPI_LOCALNRANKS", "2"}, {"PMI_KVSNAME", "kvs_1"}});
  auto e = readLaunchEnv();
  REQUIRE(e.isOk());
  CHECK(e->launcher == "pmi");
  CHECK(e->rootAddress.rfind("127.0.0.1:", 0) == 0);
}

TEST_CASE("no launcher, or a bad value, is a clear error", "[launcher_env]") {
  {
    ScopedEnv env({});
    auto e = readLaunchEnv();
    REQUIRE_FALSE(e.isOk());
    CHECK(e.status().code() == Code::kInvalidUsage);
    CHECK_THAT(e.status().message(), Catch::Contains("TUTTI_RANK") && Catch::Contains("SLURM"));
  }
  {
    ScopedEnv env({{"TUTTI_RANK", "x"}, {"TUTTI_NRANKS", "2"}});
    auto e = readLaunchEnv();
    REQUIRE_FALSE(e.isOk());
    CHECK_THAT(e.status().message(), Catch::Contains("TUTTI_RANK") && Catch::Contains("'x'"));
  }
  {
    ScopedEnv env({{"TUTTI_RANK", "5"}, {"TUTTI_NRANKS", "2"}});
    auto e = readLaunchEnv();
    REQUIRE_FALSE(e.isOk());
    CHECK(e.status().code() == Code::kInvalidArgument);
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});  // multi-host, no address known
    auto e = readLaunchEnv();
    REQUIRE_FALSE(e.isOk());
    CHECK_THAT(e.status().message(), Catch::Contains("TUTTI_COMM_ID"));
  }
}

}  // namespace tutti
