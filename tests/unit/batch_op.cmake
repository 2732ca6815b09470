# base/batch_op.h (the bytes a batched operation touches) and core/device/staged.h's span merging:
# the staged device executor's range arithmetic, no CUDA needed.
tutti_add_test(batch_op_test LABEL unit SOURCES batch_op_test.cc)
