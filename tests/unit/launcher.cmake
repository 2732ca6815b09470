# Included by tests/unit/CMakeLists.txt. The launcher test also drives the built tutti-run.
tutti_add_test(launcher_test LABEL unit SOURCES launcher_test.cc)
target_compile_definitions(launcher_test PRIVATE TUTTI_RUN_PATH="$<TARGET_FILE:tutti-run>")
add_dependencies(launcher_test tutti-run)
