# ib transport. Device-free parts (label unit): selection, blob, registration cache, completion
# texts, FIFO/credit protocol over a fake wire. Transport choice between pretend hosts (label mp;
# runs everywhere). Allreduce over a real port (label ib; exits 77 without an active port).
set(TUTTI_IB_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/../ib)
tutti_add_test(ib_unit_test LABEL unit SOURCES
  ${TUTTI_IB_TESTS}/ib_select_test.cc
  ${TUTTI_IB_TESTS}/ib_blob_test.cc
  ${TUTTI_IB_TESTS}/ib_reg_cache_test.cc
  ${TUTTI_IB_TESTS}/ib_fifo_channel_test.cc)
if(TUTTI_HAVE_IB)
  tutti_add_test(ib_mp_test LABEL mp SOURCES ${TUTTI_IB_TESTS}/ib_mp_test.cc TIMEOUT 300)
  tutti_add_test(ib_allreduce_test LABEL ib SOURCES ${TUTTI_IB_TESTS}/ib_allreduce_test.cc
    TIMEOUT 300)
endif()

# The ib transport end to end in one process over a fake libibverbs (tests/ib/fake_ibverbs.cc),
# loaded through TUTTI_IB_LIBRARY: runs anywhere the verbs headers are installed.
if(TUTTI_HAVE_IB)
  add_library(tutti_fake_ibverbs SHARED ${TUTTI_IB_TESTS}/fake_ibverbs.cc)
  target_include_directories(tutti_fake_ibverbs PRIVATE ${IBVERBS_INCLUDE_DIRS})
  set_target_properties(tutti_fake_ibverbs PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fake_ibverbs)
  tutti_add_test(ib_fake_verbs_test LABEL unit SOURCES ${TUTTI_IB_TESTS}/ib_fake_verbs_test.cc)
  target_compile_definitions(ib_fake_verbs_test PRIVATE
    TUTTI_FAKE_IBVERBS="$<TARGET_FILE:tutti_fake_ibverbs>")
  add_dependencies(ib_fake_verbs_test tutti_fake_ibverbs)
endif()
