// Unit: WordNet 3.0's data files as wndb(5) describes them (src/lv2/text/wordnet.h).
#include <gtest/gtest.h>

#include <filesystem>

#include "deep500/core/error.h"
#include "lv2/text/wordnet.h"

namespace d5::text {
namespace {

// Lines in the files' own form (the first three are from data.noun and data.adj, shortened).
const std::string kLines =
    "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived or known  \n"
    "00001740 00 a 01 able 0 005 = 05200169 n 0000 | (usually followed by `to') having the necessary means; "
    "\"able to swim\"; \"she was able to program her computer\"  \n"
    "00003553 00 s 02 emergent 0 emerging 0 003 & 00003356 a 0000 | coming into existence; \"an emergent republic\"  \n"
    "01234567 44 s 01 abridged 0 000 | (used of texts) shortened; with parts removed  \n";

TEST(WordNet, SynsetLinesGiveTheirIdLexicographerFileAndDefinition) {
  const auto s = parse_wordnet_data(kLines, "data.test");
  ASSERT_EQ(s.size(), 4u);  // the license line is skipped
  EXPECT_EQ(s[0].id, "n00001740");
  EXPECT_EQ(s[0].lexicographer_file, 3);
  EXPECT_EQ(s[0].definition, "that which is perceived or known");
  // A noun and an adjective may share an offset: the part of speech keeps the ids apart.
  EXPECT_EQ(s[1].id, "a00001740");
  EXPECT_EQ(s[1].lexicographer_file, 0);
  EXPECT_EQ(s[1].definition, "(usually followed by `to') having the necessary means");
  // Satellite adjectives live in the adjective file's offsets: "s" counts as "a".
  EXPECT_EQ(s[2].id, "a00003553");
  EXPECT_EQ(s[2].definition, "coming into existence");
  // A semicolon without a quoted example is part of the definition.
  EXPECT_EQ(s[3].definition, "(used of texts) shortened; with parts removed");
  EXPECT_EQ(s[3].lexicographer_file, 44);
}

TEST(WordNet, MalformedLinesAreFormatErrorsNamingFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"00001740 03 n 01 entity 0 000 that which is\n", "data.test:1: a synset line without ' | '"},
      {"\n0000174 03 n 01 entity 0 000 | that\n", "data.test:2: synset offset '0000174' is not 8 decimal digits"},
      {"00001740 3 n 01 entity 0 000 | that\n", "lex_filenum '3' is not 2 decimal digits"},
      {"00001740 45 n 01 entity 0 000 | that\n", "lex_filenum 45 is outside lexnames(5)'s 0-44"},
      {"00001740 03 x 01 entity 0 000 | that\n", "ss_type 'x' is none of n, v, a, s, r"},
      {"00001740 03 n 01 entity 0 000 |  ; \"only an example\"\n", "synset n00001740 has an empty gloss"}};
  for (const auto& [text, message] : bad) {
    try {
      parse_wordnet_data(text, "data.test");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(WordNet, LexicographerFilesAreThoseOfLexnames) {
  const auto& f = wordnet_lexicographer_files();
  ASSERT_EQ(f.size(), 45u);
  EXPECT_EQ(f[0], "adj.all");
  EXPECT_EQ(f[3], "noun.Tops");
  EXPECT_EQ(f[5], "noun.animal");
  EXPECT_EQ(f[28], "noun.time");
  EXPECT_EQ(f[29], "verb.body");
  EXPECT_EQ(f[43], "verb.weather");
  EXPECT_EQ(f[44], "adj.ppl");
}

TEST(WordNet, AMissingFileNamesTheDebianPackage) {
  try {
    read_wordnet("/nonexistent/wordnet");
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/wordnet/data.noun"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("wordnet-base"), std::string::npos) << e.what();
  }
}

// Debian's wordnet-base (scripts/install-deps.sh installs it). Counts: the lines of each file
// that do not start with two spaces (grep -vc '^  '): 82,115 + 13,767 + 18,156 + 3,621.
TEST(WordNet, DebiansWordNetHasAllItsSynsets) {
  const std::string dir = "/usr/share/wordnet";
  if (!std::filesystem::exists(dir + "/data.noun")) GTEST_SKIP() << "no WordNet at " << dir << " (Debian: wordnet-base)";
  const auto all = read_wordnet(dir);
  EXPECT_EQ(all.size(), 117'659u);
  std::vector<int> per_file(45, 0);
  for (const auto& s : all) ++per_file[static_cast<size_t>(s.lexicographer_file)];
  for (size_t f = 0; f < per_file.size(); ++f) EXPECT_GT(per_file[f], 0) << wordnet_lexicographer_files()[f];
  EXPECT_EQ(all.front().id, "n00001740");
  EXPECT_EQ(all.front().definition,
            "that which is perceived or known or inferred to have its own distinct existence (living or nonliving)");
  EXPECT_EQ(per_file[16], 42);  // noun.motive, the smallest: awk '$2 == 16' data.noun | wc -l
}

}  // namespace
}  // namespace d5::text
