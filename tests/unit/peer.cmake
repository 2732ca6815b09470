# The peer compiler and interpreter (core/device/peer_compile.h, kernels/peer_interp.h) in the
# host emulator against the host engine's arithmetic, bit for bit. -ffp-contract=off: the
# reference's arithmetic must not fuse into FMA (as device_compile_test).
tutti_add_test(peer_test LABEL unit SOURCES peer_test.cc TIMEOUT 600)
target_compile_options(peer_test PRIVATE -ffp-contract=off)
# The peer executor (core/device/peer.h) on an emulated device: streams as worker threads,
# kernels run by the host emulator.
tutti_add_test(peer_executor_test LABEL unit SOURCES peer_executor_test.cc TIMEOUT 300)
# The peer executor with ranks in forked processes, each mapping the others' arenas (the
# emulated device's memory is shared memory).
tutti_add_test(peer_process_test LABEL unit SOURCES peer_process_test.cc TIMEOUT 300)
