# D5_FUZZ: instrument everything built from here on for libFuzzer (coverage feedback) and for
# AddressSanitizer + UndefinedBehaviorSanitizer, so that a parser's memory error or UB is a crash
# the fuzzer reports, not a silently wrong number. The harnesses (fuzz/CMakeLists.txt) add the
# libFuzzer driver itself at link time.
if(NOT D5_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "D5_FUZZ=ON needs clang (libFuzzer is part of clang), but the compilers are "
                      "${CMAKE_C_COMPILER_ID}/${CMAKE_CXX_COMPILER_ID}: configure a separate build directory "
                      "with CC=clang CXX=clang++ (`make fuzz` does), and install clang and its libclang-rt-N-dev "
                      "(scripts/install-deps.sh)")
endif()
# UB aborts instead of printing and continuing: otherwise libFuzzer would never count it.
set(D5_FUZZ_SANITIZERS address,undefined)
# Optimization and debug info are the build type's (the Makefile's FUZZ_OPT_FLAGS).
add_compile_options(-fsanitize=fuzzer-no-link,${D5_FUZZ_SANITIZERS} -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
# Anything else linked in this build (libraries' executables) needs the sanitizer runtimes.
add_link_options(-fsanitize=${D5_FUZZ_SANITIZERS})
message(STATUS "D5_FUZZ: building with -fsanitize=fuzzer-no-link,${D5_FUZZ_SANITIZERS}; harnesses in fuzz/")
