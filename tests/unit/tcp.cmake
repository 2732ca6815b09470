tutti_add_test(tcp_transport_test LABEL unit SOURCES tcp_transport_test.cc)
