// Error kinds and the exit codes they end a process with (docs/cli.md#exit-codes).
#include <gtest/gtest.h>

#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/metrics/exit_codes.h"

namespace d5 {
namespace {

TEST(ExitCodes, EveryErrorKindHasItsCode) {
  EXPECT_EQ(exit_code_for(ErrorKind::InvalidArgument), 2);
  EXPECT_EQ(exit_code_for(ErrorKind::Unimplemented), 3);
  EXPECT_EQ(exit_code_for(ErrorKind::IoError), 4);
  EXPECT_EQ(exit_code_for(ErrorKind::FormatError), 4);
  EXPECT_EQ(exit_code_for(ErrorKind::Internal), 5);
  EXPECT_EQ(exit_code_for(ErrorKind::NotBuilt), 6);
  EXPECT_EQ(to_string(ErrorKind::NotBuilt), "NotBuilt");
}

// Code that handles refusals (catch Unimplemented) handles "not built" too, and the kind survives
// both the throw macro and added context.
TEST(ExitCodes, NotBuiltIsAnUnimplementedOfItsOwnKind) {
  try {
    D5_THROW(NotBuilt, "this d5 was built without {}", "X");
  } catch (const Unimplemented& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotBuilt);
    EXPECT_NE(dynamic_cast<const NotBuilt*>(&e), nullptr);
    try {
      rethrow_with_message(e, std::string("while loading the model: ") + e.what());
    } catch (const NotBuilt& again) {
      EXPECT_EQ(std::string(again.what()), "while loading the model: this d5 was built without X");
      return;
    }
  }
  FAIL() << "NotBuilt was not thrown or lost its kind";
}

TEST(ExitCodes, AnUnimplementedIsNotNotBuilt) {
  try {
    D5_THROW(Unimplemented, "no kernel for this case");
  } catch (const Unimplemented& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unimplemented);
    EXPECT_EQ(dynamic_cast<const NotBuilt*>(&e), nullptr);
  }
}

// The backends this build left out are exactly deep500's backend folders minus the built ones.
TEST(ExitCodes, NotBuiltBackendsAreTheOnesLeftOut) {
  const BuildInfo& b = build_info();
  for (const char* name : {"reference", "torch", "onednn", "cuda"}) {
    const bool built = ("," + b.backends + ",").find(std::string(",") + name + ",") != std::string::npos;
    EXPECT_EQ(is_not_built_backend(name), !built) << name << " (built: " << b.backends << ")";
  }
  EXPECT_FALSE(is_not_built_backend("no-such-backend"));
  EXPECT_FALSE(is_not_built_backend(""));
  EXPECT_FALSE(is_not_built_backend("torc"));
}

}  // namespace
}  // namespace d5
