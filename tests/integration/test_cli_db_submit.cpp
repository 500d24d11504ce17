// Integration: `d5 db submit` on bundles of real recipe runs (LeNet-5, a few MNIST steps): accepted
// ones stored once and ranked by the score read back from their result files; each kind of
// tampering refused with its reason and nothing stored; --verify-outputs rerunning the recipe.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"
#include "tiny_list_recipe.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMnist = D5_SOURCE_DIR "/../shared/data/mnist";

json load(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void save(const std::string& path, const json& j) { std::ofstream(path) << j.dump(1); }

class CliDbSubmit : public ::testing::Test {
 protected:
  TempDir dir_{"d5-cli-submit"};
  std::string recipe_ = dir_.file("tiny-list.yaml");

  void SetUp() override {
    if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
    write_tiny_list_recipe(recipe_, kMnist);
  }

  std::string db() const { return dir_.file("list.db"); }

  // A recipe run: its results directory.
  std::string bundle(const std::string& name, const std::string& lr, bool deterministic = true) {
    const std::string out = dir_.file(name);
    std::vector<std::string> args = {"run", recipe_, "--results-dir", out, "--set", "lr=" + lr};
    if (deterministic) args.insert(args.begin(), "--deterministic");
    const auto r = run_d5(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return out;
  }

  // A copy of a bundle to tamper with.
  std::string copy(const std::string& bundle, const std::string& name) {
    const std::string to = dir_.file(name);
    fs::copy(bundle, to, fs::copy_options::recursive);
    return to;
  }

  ProcessResult submit(const std::string& bundle, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"db", "submit", bundle, "--db", db(), "--recipe", recipe_, "--format", "json"};
    args.insert(args.end(), more.begin(), more.end());
    return run_d5(args);
  }

  json lists() {
    const auto r = run_d5({"db", "submissions", "--db", db(), "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["lists"];
  }

  // Refused: exit 1, a problem containing `why`, and the database holds no submission.
  void expect_refused(const ProcessResult& r, const std::string& why) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    const json j = json::parse(r.out);
    EXPECT_FALSE(j["accepted"].get<bool>());
    EXPECT_NE(j["problems"].dump().find(why), std::string::npos) << "expected '" << why << "' in " << j["problems"];
    if (fs::exists(db())) {
      EXPECT_TRUE(lists().empty());
    }
  }
};

double final_loss(const std::string& bundle) {
  return load(bundle + "/lenet5.json")["cases"][0]["extra"]["final_loss"].get<double>();
}

TEST_F(CliDbSubmit, AcceptedBundlesAreStoredOnceAndRankedByTheirScore) {
  const std::string slow = bundle("slow", "0.001"), fast = bundle("fast", "0.05");
  auto r = submit(slow, {"--submitter", "alice", "--system", "box-a"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_TRUE(j["accepted"].get<bool>());
  EXPECT_TRUE(j["added"].get<bool>());
  EXPECT_EQ(j["submission"]["division"], "closed");
  EXPECT_EQ(j["submission"]["score"].get<double>(), final_loss(slow));  // exactly the file's value
  EXPECT_GE(j["checks"].size(), 3u) << j["checks"];
  // The same bundle again: kept, not added twice.
  r = submit(slow, {"--submitter", "alice"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(json::parse(r.out)["added"].get<bool>());
  ASSERT_EQ(submit(fast, {"--submitter", "bob", "--system", "box-b"}).exit_code, 0);

  const json l = lists();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["recipe"], "tiny-list");
  EXPECT_EQ(l[0]["quantity"], "final_loss");
  ASSERT_EQ(l[0]["submissions"].size(), 2u);
  const json& first = l[0]["submissions"][0];
  const json& second = l[0]["submissions"][1];
  // Ranked by the losses the result files hold, lower first.
  const bool fast_wins = final_loss(fast) < final_loss(slow);
  EXPECT_EQ(first["submitter"], fast_wins ? "bob" : "alice");
  EXPECT_EQ(first["rank"], 1);
  EXPECT_EQ(second["rank"], 2);
  EXPECT_EQ(first["score"].get<double>(), std::min(final_loss(fast), final_loss(slow)));
  EXPECT_EQ(second["score"].get<double>(), std::max(final_loss(fast), final_loss(slow)));
  EXPECT_EQ(first["backends"], "reference");
  // The bundle's files are runs of the history too.
  r = run_d5({"db", "query", "--db", db(), "--metric", "loss", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["measurements"].size(), 2u);
}

TEST_F(CliDbSubmit, TamperedBundlesAreRefusedWithTheReasonAndNothingIsStored) {
  const std::string good = bundle("good", "0.01");

  // The recipe was edited: not the published one.
  std::string b = copy(good, "edited-recipe");
  json run = load(b + "/run.json");
  run["manifest"]["extra"]["recipe"]["text"] = run["manifest"]["extra"]["recipe"]["text"].get<std::string>() + "# x\n";
  save(b + "/run.json", run);
  expect_refused(submit(b), "is not the published one");

  // A result file's final loss raised past the criterion: run.json's PASS no longer follows.
  b = copy(good, "edited-result");
  json result = load(b + "/lenet5.json");
  result["cases"][0]["extra"]["final_loss"] = 1000.0;
  save(b + "/lenet5.json", result);
  expect_refused(submit(b), "criterion 'final_loss < 100' is recorded PASS");

  // run.json's recorded value edited (a better-looking number).
  b = copy(good, "edited-summary");
  run = load(b + "/run.json");
  run["cases"][0]["extra"]["criteria"][0]["value"] = 0.001;
  save(b + "/run.json", run);
  expect_refused(submit(b), "its result file gives PASS");

  // A result file missing.
  b = copy(good, "missing-result");
  fs::remove(b + "/lenet5.json");
  expect_refused(submit(b), "its result file lenet5.json is missing");

  // An override of a fixed option recorded (d5 run would have refused it).
  b = copy(good, "fixed-override");
  run = load(b + "/run.json");
  run["manifest"]["extra"]["recipe"]["overrides"] = {"model=mlp"};
  save(b + "/run.json", run);
  expect_refused(submit(b), "overrides are not allowed");

  // A different seed than the runs used: the planned commands differ.
  b = copy(good, "other-seed");
  run = load(b + "/run.json");
  run["manifest"]["seeds"]["master"] = run["manifest"]["seeds"]["master"].get<uint64_t>() + 1;
  save(b + "/run.json", run);
  expect_refused(submit(b), "not the planned");

  // Not a recipe run at all.
  expect_refused(submit(good + "/lenet5.json"), "not of a recipe run");

  // The untouched bundle is accepted after all that.
  EXPECT_EQ(submit(good).exit_code, 0);
  EXPECT_EQ(lists()[0]["submissions"].size(), 1u);
}

TEST_F(CliDbSubmit, VerifyingOutputsRerunsTheRecipeAndCatchesEditedOutputs) {
  const std::string good = bundle("det", "0.01");
  auto r = submit(good, {"--verify-outputs"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(json::parse(r.out)["submission"]["outputs_verified"].get<bool>());
  EXPECT_TRUE(lists()[0]["submissions"][0]["outputs_verified"].get<bool>());

  // A loss curve edited where no criterion looks: only the rerun can tell.
  TempDir other("d5-cli-submit-other");
  const std::string b = copy(good, "edited-loss");
  json result = load(b + "/lenet5.json");
  for (auto& m : result["cases"][0]["metrics"])
    if (m["name"] == "loss") m["samples"][0] = m["samples"][0].get<double>() * 0.5;
  save(b + "/lenet5.json", result);
  r = run_d5({"db", "submit", b, "--db", other.file("o.db"), "--recipe", recipe_, "--verify-outputs", "--format",
              "json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("outputs not reproduced"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss sample 0"), std::string::npos) << r.out;

  // Without --deterministic there is nothing a rerun could verify.
  const std::string loose = bundle("loose", "0.01", false);
  r = run_d5({"db", "submit", loose, "--db", other.file("o.db"), "--recipe", recipe_, "--verify-outputs", "--format",
              "json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("needs a bundle run with --deterministic"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace d5::test
