# Kernel tests: the reference model must round like the kernels (no FMA contraction).
tutti_add_test(kernels_test LABEL unit SOURCES kernels_test.cc)
target_compile_options(kernels_test PRIVATE -ffp-contract=off)
tutti_add_test(kernels_convert_test LABEL unit SOURCES kernels_convert_test.cc)
