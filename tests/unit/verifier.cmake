# The schedule verifier: hand-built broken schedules, the registry, and `tutti-sched verify` over
# every algorithm for nranks 1..64 (run-length buffers keep 1<<20 elements as cheap as 1).
tutti_add_test(verifier_test LABEL unit SOURCES verifier_test.cc)
add_test(NAME unit.tutti_sched_verify_all
  COMMAND $<TARGET_FILE:tutti-sched> verify --all --nranks 1-64 --count 0,1,n-1,n+1,1009,1048576)
set_tests_properties(unit.tutti_sched_verify_all PROPERTIES LABELS unit TIMEOUT 120)
