# kernels::program: the CPU emulator against the host engine's kernels, and validate's errors.
# -ffp-contract=off: the reference and the emulator must round like the kernels (no FMA).
tutti_add_test(program_eval_test LABEL unit SOURCES program_eval_test.cc)
target_compile_options(program_eval_test PRIVATE -ffp-contract=off)
