# nccl/staging_ranges.cc (the staged device path's range arithmetic) on its own: no CUDA needed.
tutti_add_test(staging_ranges_test LABEL unit
  SOURCES staging_ranges_test.cc ${PROJECT_SOURCE_DIR}/nccl/staging_ranges.cc)
