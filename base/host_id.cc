// File: base/host_id.cc
#include "base/host_id.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/env.h"
#include <fmt/format.h>

namespace tutti {

std::string hostName() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

const std::string& bootId() {
  static const std::string id = [] {
    std::string boot;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
    return boot;
  }();
  return id;
}

const std::string& hostId() {
  static const std::string id = [] {
    if (auto v = env::get({"TUTTI_HOSTID"}); v && !v->empty()) return *v;
    const std::string& boot = bootId();
    struct stat st {};
    unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
    return fmt::format("{}/{}/netns:{}", hostName(), boot, netns);
  }();
  return id;
}

}  // namespace tutti
