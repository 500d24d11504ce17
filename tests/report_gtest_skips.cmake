# cmake -DTEST=<name> -DRESULTS=<results.xml> -P report_gtest_skips.cmake
#
# The companion of a test that runs a whole GoogleTest binary in one process (d5_add_skip_report in
# tests/CMakeLists.txt). Such a test passes when every case passed or skipped, so its skips would
# not show in ctest's summary; this one reads the binary's XML results and prints each skipped case
# as GoogleTest does ("file:line: Skipped", the reason, "[  SKIPPED ] Suite.Case"), which its
# SKIP_REGULAR_EXPRESSION turns into a skipped test. It never decides pass or fail for the cases
# themselves: that stays with the test it reports on.
#
# The results file is removed once read, so that a later run whose binary crashed before writing
# one is reported as such instead of with the old file's skips.

cmake_minimum_required(VERSION 3.20)

if(NOT DEFINED TEST OR NOT DEFINED RESULTS)
  message(FATAL_ERROR "usage: cmake -DTEST=<name> -DRESULTS=<results.xml> -P report_gtest_skips.cmake")
endif()
if(NOT EXISTS "${RESULTS}")
  message(FATAL_ERROR "${TEST} wrote no results to ${RESULTS}: it did not run to its end (it failed, crashed or "
                      "was not selected; its own output says why). Run it together with ${TEST}_skips.")
endif()

file(READ "${RESULTS}" xml)
file(REMOVE "${RESULTS}")

function(xml_unescape out text)
  string(REPLACE "&#x0A;" "\n" text "${text}")
  string(REPLACE "&quot;" "\"" text "${text}")
  string(REPLACE "&apos;" "'" text "${text}")
  string(REPLACE "&lt;" "<" text "${text}")
  string(REPLACE "&gt;" ">" text "${text}")
  string(REPLACE "&amp;" "&" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

string(REGEX MATCH "<testsuites tests=\"([0-9]+)\"" _ "${xml}")
set(total "${CMAKE_MATCH_1}")

# Walked match by match rather than with REGEX MATCHALL: a CMake list would split the messages at
# their semicolons and brackets.
set(skipped_case "<testcase [^>]*result=\"skipped\"[^>]*>[ \n\r\t]*<skipped message=\"[^\"]*\"")
set(count 0)
set(rest "${xml}")
while(TRUE)
  string(REGEX MATCH "${skipped_case}" c "${rest}")
  if(c STREQUAL "")
    break()
  endif()
  string(FIND "${rest}" "${c}" at)
  string(LENGTH "${c}" length)
  math(EXPR next "${at} + ${length}")
  string(SUBSTRING "${rest}" ${next} -1 rest)

  string(REGEX MATCH " name=\"([^\"]*)\"" _ "${c}")
  set(name "${CMAKE_MATCH_1}")
  string(REGEX MATCH " classname=\"([^\"]*)\"" _ "${c}")
  set(suite "${CMAKE_MATCH_1}")
  string(REGEX MATCH "<skipped message=\"([^\"]*)\"" _ "${c}")
  xml_unescape(message "${CMAKE_MATCH_1}")
  # GoogleTest's message starts with the location on a line of its own.
  string(FIND "${message}" "\n" newline)
  if(newline GREATER -1)
    string(SUBSTRING "${message}" 0 ${newline} where)
    math(EXPR after "${newline} + 1")
    string(SUBSTRING "${message}" ${after} -1 reason)
  else()
    set(where "${suite}.${name}")
    set(reason "${message}")
  endif()
  if(reason STREQUAL "")
    set(reason "(no reason given)")
  endif()
  message("${where}: Skipped\n${reason}\n[  SKIPPED ] ${suite}.${name}")
  math(EXPR count "${count} + 1")
endwhile()

if(count EQUAL 0)
  message("${TEST}: none of its ${total} cases was skipped")
else()
  message("${TEST}: ${count} of its ${total} cases skipped (listed above)")
endif()
