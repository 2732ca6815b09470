# bench/compare/report.py (the compare_peers report) on a made-up results folder.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME unit.compare_report.launches
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/compare_report_test.py
                   ${PROJECT_SOURCE_DIR}/bench/compare/report.py)
  set_tests_properties(unit.compare_report.launches PROPERTIES LABELS unit TIMEOUT 60)
endif()
