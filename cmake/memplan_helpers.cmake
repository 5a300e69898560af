# Helpers that keep each folder's CMakeLists short (after abseil's
# absl_cc_library and leveldb's leveldb_test).

set(MEMPLAN_WARNINGS -Wall -Wextra -Wno-unused-parameter
    -Wno-missing-field-initializers)

# memplan_cc_library(NAME name SRCS ... [HDRS ...] [DEPS ...])
# Defines memplan_<name> with the alias memplan::<name>.
function(memplan_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  set(target memplan_${ARG_NAME})
  if(ARG_SRCS)
    add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} PUBLIC ${ARG_DEPS})
    target_compile_options(${target} PRIVATE ${MEMPLAN_WARNINGS})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
  endif()
  add_library(memplan::${ARG_NAME} ALIAS ${target})
endfunction()

# memplan_cc_test(NAME name SRCS ... [DEPS ...])
# A GoogleTest binary registered with CTest, one CTest entry per test case.
function(memplan_cc_test)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  if(NOT MEMPLAN_BUILD_TESTS)
    return()
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${ARG_NAME} PRIVATE ${MEMPLAN_WARNINGS})
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 600)
endfunction()
