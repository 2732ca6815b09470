# Topology (hwloc probe, JSON, examples), link model and selector; tutti-topo's round trip.
tutti_add_test(topology_test LABEL unit SOURCES topology_test.cc)
target_compile_definitions(topology_test PRIVATE TUTTI_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
tutti_add_test(selector_test LABEL unit SOURCES selector_test.cc)
target_compile_definitions(selector_test PRIVATE TUTTI_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The command-line round trip: tutti-topo --json, loaded back through TUTTI_TOPO_FILE, printed
# again, must give the same bytes; and the tree names what the probe found.
add_test(NAME unit.tutti_topo_roundtrip
  COMMAND sh -c "set -e; d=$(mktemp -d); '$<TARGET_FILE:tutti-topo>' --json > $d/a.json; \
TUTTI_TOPO_FILE=$d/a.json '$<TARGET_FILE:tutti-topo>' --json > $d/b.json; cmp $d/a.json $d/b.json; \
'$<TARGET_FILE:tutti-topo>' | grep -q Package; '$<TARGET_FILE:tutti-topo>' | grep -q NUMANode; \
'$<TARGET_FILE:tutti-topo>' | grep -q 'Cache L'; rm -r $d")
set_tests_properties(unit.tutti_topo_roundtrip PROPERTIES LABELS unit TIMEOUT 60)
# tutti-sched predict on a topology file: the selector column is the cheapest, the summary line,
# --link-file, bad arguments.
add_test(NAME unit.tutti_sched_predict
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tutti_sched_predict.sh $<TARGET_FILE:tutti-sched> ${PROJECT_SOURCE_DIR})
set_tests_properties(unit.tutti_sched_predict PROPERTIES LABELS unit TIMEOUT 60)
# The probe in a network namespace whose link is a veth: listed with its speed, which the tcp
# class takes (root; skipped without namespaces).
add_test(NAME unit.tutti_topo_veth
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tutti_topo_veth.sh $<TARGET_FILE:tutti-topo>)
set_tests_properties(unit.tutti_topo_veth PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
