# Helpers shared by every target of the project.

# codeco_target_defaults(TARGET): project warnings and include root.
function(codeco_target_defaults target)
  target_compile_options(${target} PRIVATE ${CODECO_WARNINGS})
endfunction()

# codeco_test(NAME [SERIAL] [TIMEOUT SECONDS] SOURCES... LIBS ...): a Catch2 test
# binary registered with ctest, one ctest test per test case. SERIAL runs its
# cases alone (for tests that start a whole federation) with a longer timeout;
# TIMEOUT sets a case's limit (default 120 s, 300 s with SERIAL).
function(codeco_test name)
  cmake_parse_arguments(ARG "SERIAL" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  codeco_target_defaults(${name})
  target_link_libraries(${name} PRIVATE codeco_catch_main ${ARG_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  if(ARG_SERIAL)
    if(NOT ARG_TIMEOUT)
      set(ARG_TIMEOUT 300)
    endif()
    catch_discover_tests(${name} TEST_PREFIX "${name}:" PROPERTIES TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL TRUE)
  else()
    if(NOT ARG_TIMEOUT)
      set(ARG_TIMEOUT 120)
    endif()
    catch_discover_tests(${name} TEST_PREFIX "${name}:" PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()
