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
