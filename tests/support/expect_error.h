#pragma once
// Runs `f`, expecting an exception of type E whose message contains every string in `parts`; no
// exception, or one of another type, fails the test.
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

namespace d5::test {

template <typename E, typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace d5::test
