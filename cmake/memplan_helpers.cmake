# Helpers that keep each folder's CMakeLists short (after abseil's
# absl_cc_library and leveldb's leveldb_test).

set(MEMPLAN_WARNINGS -Wall -Wextra -Wno-unused-parameter
    -Wno-missing-field-initializers)

# memplan_cc_library(NAME name SRCS ... [HDRS ...] [DEPS ...] [INSTALL])
# Defines memplan_<name> with the alias memplan::<name>. INSTALL: `cmake
# --install` puts the library and every header of its folder (testing/
# helpers included) under <prefix>/include/memplan/<folder>/, exported as
# memplan::<name> by find_package(memplan CONFIG).
function(memplan_cc_library)
  cmake_parse_arguments(ARG "INSTALL" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  set(target memplan_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/memplan>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  target_compile_options(${target} PRIVATE ${MEMPLAN_WARNINGS})
  add_library(memplan::${ARG_NAME} ALIAS ${target})
  if(ARG_INSTALL)
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${ARG_NAME})
    install(TARGETS ${target} EXPORT memplanTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
    file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}
         ${CMAKE_CURRENT_SOURCE_DIR})
    install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memplan/${folder}
            FILES_MATCHING PATTERN "*.h")
  endif()
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

# memplan_instrument(): compile and link everything with MEMPLAN_SANITIZE's
# sanitizers and, for MEMPLAN_FUZZ, libFuzzer's coverage instrumentation.
# Sanitizer builds favour quick compiles (-O1, line tables only).
function(memplan_instrument)
  set(flags "")
  if(MEMPLAN_SANITIZE)
    list(APPEND flags -fsanitize=${MEMPLAN_SANITIZE} -fno-omit-frame-pointer
         -fno-sanitize-recover=all)
  endif()
  if(MEMPLAN_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      message(FATAL_ERROR "MEMPLAN_FUZZ needs clang (CXX=clang++)")
    endif()
    list(APPEND flags -fsanitize=fuzzer-no-link)
  endif()
  if(flags)
    add_compile_options(${flags} -O1 -g1)
    add_link_options(${flags})
  endif()
endfunction()

# memplan_fuzz_target(NAME name SRCS ... [DEPS ...]): with MEMPLAN_FUZZ, a
# libFuzzer binary in build/fuzz/ (scripts/fuzz.sh runs it on the seeds of
# tests/fuzz/corpus/NAME); otherwise a replay binary and a CTest entry
# running the target once on every seed and every past crasher
# (tests/fuzz/regressions/NAME).
function(memplan_fuzz_target)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE ${MEMPLAN_WARNINGS})
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/fuzz)
  if(MEMPLAN_FUZZ)
    target_link_options(${ARG_NAME} PRIVATE -fsanitize=fuzzer)
    return()
  endif()
  target_sources(${ARG_NAME} PRIVATE
                 ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
  add_test(NAME fuzz_replay.${ARG_NAME}
           COMMAND ${ARG_NAME}
                   ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${ARG_NAME}
                   ${PROJECT_SOURCE_DIR}/tests/fuzz/regressions/${ARG_NAME})
  set_tests_properties(fuzz_replay.${ARG_NAME} PROPERTIES TIMEOUT 300)
endfunction()
