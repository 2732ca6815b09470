/* File: tests/nccl/fake_hwloc.c
 * A "libhwloc.so.15" without hwloc's functions, for tests/nccl/no_hwloc.sh: put first on
 * LD_LIBRARY_PATH, it stands for a machine whose hwloc is missing or unusable. */
int tutti_fake_hwloc_marker = 1;
