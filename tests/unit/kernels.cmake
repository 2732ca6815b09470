tutti_add_test(kernels_test LABEL unit SOURCES kernels_test.cc)
