# base/page_buffer.h: the page-aligned buffers the kernel copies into (tcp staging, scratch).
tutti_add_test(page_buffer_test LABEL unit SOURCES page_buffer_test.cc)
