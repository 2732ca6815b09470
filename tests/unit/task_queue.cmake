# base/task_queue.h: the in-order task thread (communicators' progress thread, the NCCL worker).
tutti_add_test(task_queue_test LABEL unit SOURCES task_queue_test.cc)
