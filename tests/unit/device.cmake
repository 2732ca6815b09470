# The clique compiler (core/device/compile.h): compiled Programs run by the CPU evaluator against
# the schedules run with the host engine's kernels, bit for bit. -ffp-contract=off: the test's own
# arithmetic must not be fused into FMA (as kernels_test).
tutti_add_test(device_compile_test LABEL unit SOURCES device_compile_test.cc)
target_compile_options(device_compile_test PRIVATE -ffp-contract=off)
# The device path's choice at init from every rank's placement (core/device/placement.h).
tutti_add_test(placement_test LABEL unit SOURCES placement_test.cc)
