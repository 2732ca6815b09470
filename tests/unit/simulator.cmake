tutti_add_test(simulator_test LABEL unit SOURCES simulator_test.cc)
