# Helpers shared by every target of the project.

# codeco_target_defaults(TARGET): project warnings and include root.
function(codeco_target_defaults target)
  target_compile_options(${target} PRIVATE ${CODECO_WARNINGS})
endfunction()

# codeco_test(NAME [SERIAL] SOURCES... LIBS ...): a Catch2 test binary registered
# with ctest, one ctest test per test case. SERIAL runs its cases alone (for
# tests that start a whole federation) with a longer timeout.
function(codeco_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  codeco_target_defaults(${name})
  target_link_libraries(${name} PRIVATE codeco_catch_main ${ARG_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  if(ARG_SERIAL)
    catch_discover_tests(${name} TEST_PREFIX "${name}:" PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE)
  else()
    catch_discover_tests(${name} TEST_PREFIX "${name}:" PROPERTIES TIMEOUT 120)
  endif()
endfunction()
