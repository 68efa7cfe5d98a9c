# Fails when a Catch2 test case name contains ',' or ';'. catch_discover_tests
# registers one ctest test per case by name: ';' splits the name as a CMake
# list and ',' is Catch's "or" in a test spec, and either way ctest runs no
# case at all yet reports a pass.
#   cmake -DROOT=<source dir> -P check_test_names.cmake
set(bad "")
foreach(dir libs services tools integration-tests bench)
  file(GLOB_RECURSE sources "${ROOT}/${dir}/*.cc")
  foreach(source ${sources})
    file(STRINGS "${source}" lines REGEX "TEST_CASE\\(\"[^\"]*[,;]")
    foreach(line ${lines})
      string(APPEND bad "\n  ${source}: ${line}")
    endforeach()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "test case names with ',' or ';' (ctest would run nothing):${bad}")
endif()
message(STATUS "test case names: ok")
