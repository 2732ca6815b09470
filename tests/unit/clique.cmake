# The device clique's protocol (core/device/clique.h) on emulated streams: no GPU needed.
tutti_add_test(clique_test LABEL unit SOURCES clique_test.cc TIMEOUT 300)
