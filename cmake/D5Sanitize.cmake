# D5_SANITIZE=address|thread: the whole build instrumented by a sanitizer, for `make test-asan`
# (AddressSanitizer + UndefinedBehaviorSanitizer) and `make test-tsan` (ThreadSanitizer); see
# docs/sanitizers.md. Each needs a build directory of its own: every object must be instrumented
# alike. Libraries from the system (LibTorch, oneDNN, MPI) are not, which is why those targets
# configure without the backends that would hide their own races and leaks in ours.
set(D5_SANITIZE "" CACHE STRING "Instrument the build: address (ASan + UBSan) or thread (TSan); empty: none")
set_property(CACHE D5_SANITIZE PROPERTY STRINGS "" address thread)
if(D5_SANITIZE STREQUAL "")
  return()
elseif(D5_SANITIZE STREQUAL "address")
  # UB stops the program: a report that printed and carried on would let the test pass.
  set(d5_sanitizers address,undefined)
  set(d5_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(D5_SANITIZE STREQUAL "thread")
  set(d5_sanitizers thread)
  set(d5_sanitize_flags -fsanitize=thread)
else()
  message(FATAL_ERROR "D5_SANITIZE='${D5_SANITIZE}' is not valid: use address, thread or leave it empty")
endif()
if(D5_FUZZ)
  message(FATAL_ERROR "D5_SANITIZE and D5_FUZZ are separate builds: D5_FUZZ already instruments with ASan + UBSan")
endif()
# C and C++ only: nvcc would not take these flags (configure without CUDA anyway: the GPU runtime
# is not instrumented).
foreach(flag IN LISTS d5_sanitize_flags ITEMS -fno-omit-frame-pointer -g)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${flag}>)
endforeach()
# GCC's flow analysis sees through less under the sanitizers' instrumentation and warns about
# values that are initialized (libstdc++'s <regex> among them, GCC 12).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-Wno-maybe-uninitialized>)
endif()
add_link_options(-fsanitize=${d5_sanitizers})
message(STATUS "D5_SANITIZE: building with -fsanitize=${d5_sanitizers}")
