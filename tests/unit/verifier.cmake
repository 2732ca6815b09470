# The schedule verifier: hand-built broken schedules, the registry, and `tutti-sched verify` over
# every algorithm for nranks 1..64 (run-length buffers keep 1<<20 elements as cheap as 1).
tutti_add_test(verifier_test LABEL unit SOURCES verifier_test.cc)
add_test(NAME unit.tutti_sched_verify_all
  COMMAND $<TARGET_FILE:tutti-sched> verify --all --nranks 1-64 --count 0,1,n-1,n+1,1009,1048576)
set_tests_properties(unit.tutti_sched_verify_all PROPERTIES LABELS unit TIMEOUT 120)
# The same with hosts (rank r on host r / L), where the hierarchical algorithms run; the pipelined
# hierarchical allreduce needs 4 MiB, so the counts reach 8 MiB + 12 bytes. The test passes on
# its summary lines: one per algorithm, none failed, and the pipelined one verified some shapes.
foreach(per 2 3)
  add_test(NAME unit.tutti_sched_verify_hosts_${per}
    COMMAND $<TARGET_FILE:tutti-sched> verify --all --nranks 4-24 --per-host ${per}
            --count 0,1,n+1,1009,1048576,2097155)
  set_tests_properties(unit.tutti_sched_verify_hosts_${per} PROPERTIES LABELS unit TIMEOUT 120
    PASS_REGULAR_EXPRESSION "allreduce hierarchical_pipelined: [^\n]* [1-9][0-9]* shapes verified[^\n]*ok"
    FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
# Fused allreduce schedules (algorithms/fusion.h), proven with the verifier.
tutti_add_test(fusion_test LABEL unit SOURCES fusion_test.cc)
