// Integration tests of `d5 models`: the real binary lists the zoo.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "process.h"

namespace d5::test {

TEST(CliModels, ListJsonHasEveryModelWithCountsAndFlops) {
  const auto r = run_d5({"models", "list", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["models"].size(), 26u);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& m : j["models"]) by_name[m["name"]] = m;
  EXPECT_EQ(by_name.at("resnet18")["parameters"], 11'689'512);
  EXPECT_EQ(by_name.at("vgg16")["parameters"], 138'357'544);
  EXPECT_EQ(by_name.at("resnet20")["default_input"], (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(by_name.at("lstm")["default_classes"], 10);
  EXPECT_EQ(by_name.at("lstm")["default_vocabulary"], 0);
  EXPECT_EQ(by_name.at("text-lstm")["default_vocabulary"], 2000);
  EXPECT_EQ(by_name.at("text-transformer")["parameters"], 658'349);
  // Embedding 2,000 x 64, LSTM 4x128 x (64 + 128) + 8x128, output layer 128 x 2,000 + 2,000.
  EXPECT_EQ(by_name.at("text-lstm-lm")["parameters"], 128'000 + 99'328 + 258'000);
  EXPECT_EQ(by_name.at("text-lstm-lm")["per_position"], true);
  EXPECT_EQ(by_name.at("text-lstm-lm")["default_classes"], 2000);
  EXPECT_EQ(by_name.at("text-lstm")["per_position"], false);
  EXPECT_EQ(by_name.at("kws-dscnn")["parameters"], 23'756);  // MLPerf Tiny's published count
  EXPECT_EQ(by_name.at("kws-dscnn")["default_input"], (std::vector<int64_t>{1, 49, 10}));
  EXPECT_EQ(by_name.at("kws-dscnn")["default_classes"], 12);
  EXPECT_EQ(by_name.at("speech-ctc")["parameters"], 473'835);  // derived in the unit tests
  EXPECT_EQ(by_name.at("speech-ctc")["default_input"], (std::vector<int64_t>{1, 149, 40}));
  EXPECT_EQ(by_name.at("speech-ctc")["default_classes"], 11);    // the blank and ten digits
  EXPECT_EQ(by_name.at("speech-ctc")["per_position"], false);    // label sequences, not one per step
  EXPECT_EQ(by_name.at("seq2seq-transformer")["parameters"], 251'870);  // derived in the unit tests
  EXPECT_EQ(by_name.at("detector-ssd")["parameters"], 166'632);
  EXPECT_EQ(by_name.at("detector-ssd")["loss"], "ssd");
  EXPECT_EQ(by_name.at("seq2seq-transformer")["default_target_length"], 12);
  EXPECT_EQ(by_name.at("seq2seq-transformer")["per_position"], true);
  EXPECT_EQ(by_name.at("lenet5")["default_target_length"], 0);
  // LeNet-5: 845,852 FLOPs (derived in the unit tests); JSON carries the double unrounded.
  EXPECT_DOUBLE_EQ(by_name.at("lenet5")["forward_gflops_batch1"].get<double>(), 845'852e-9);
  for (const auto& [name, m] : by_name) EXPECT_GT(m["forward_gflops_batch1"].get<double>(), 0) << name;
}

TEST(CliModels, ListConsoleIsATable) {
  const auto r = run_d5({"models", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("parameters"), std::string::npos);
  EXPECT_NE(r.out.find("25,557,032"), std::string::npos) << r.out;  // resnet50
  EXPECT_NE(r.out.find("mobilenet_v2"), std::string::npos);
  EXPECT_NE(r.out.find("3x224x224"), std::string::npos);
}

TEST(CliModels, UnknownSubcommandIsAUsageError) {
  const auto r = run_d5({"models", "shuffle"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(r.err.empty());
}

}  // namespace d5::test
