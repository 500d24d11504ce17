#include "wordnet.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deep500/core/error.h"

namespace d5::text {

namespace {

const char* const kDataFiles[] = {"data.noun", "data.verb", "data.adj", "data.adv"};

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// The gloss's definition: up to the first quoted example ("; \"..."), or the whole gloss.
std::string definition_of(const std::string& gloss) {
  const auto example = gloss.find("; \"");
  std::string d = trim(example == std::string::npos ? gloss : gloss.substr(0, example));
  if (!d.empty() && d.back() == ';') d = trim(d.substr(0, d.size() - 1));
  return d;
}

}  // namespace

const std::vector<std::string>& wordnet_lexicographer_files() {
  static const std::vector<std::string> names = {
      "adj.all",           "adj.pert",         "adv.all",         "noun.Tops",       "noun.act",
      "noun.animal",       "noun.artifact",    "noun.attribute",  "noun.body",       "noun.cognition",
      "noun.communication", "noun.event",      "noun.feeling",    "noun.food",       "noun.group",
      "noun.location",     "noun.motive",      "noun.object",     "noun.person",     "noun.phenomenon",
      "noun.plant",        "noun.possession",  "noun.process",    "noun.quantity",   "noun.relation",
      "noun.shape",        "noun.state",       "noun.substance",  "noun.time",       "verb.body",
      "verb.change",       "verb.cognition",   "verb.communication", "verb.competition", "verb.consumption",
      "verb.contact",      "verb.creation",    "verb.emotion",    "verb.motion",     "verb.perception",
      "verb.possession",   "verb.social",      "verb.stative",    "verb.weather",    "adj.ppl"};
  return names;
}

std::vector<WordNetSynset> parse_wordnet_data(const std::string& text, const std::string& what) {
  std::vector<WordNetSynset> out;
  std::istringstream lines(text);
  int64_t line_no = 0;
  const auto lexfiles = static_cast<int>(wordnet_lexicographer_files().size());
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    if (line.empty() || line.rfind("  ", 0) == 0) continue;  // the license header
    const auto bar = line.find(" | ");
    D5_CHECK(bar != std::string::npos, FormatError, "{}:{}: a synset line without ' | ' before its gloss", what,
             line_no);
    std::istringstream fields(line.substr(0, bar));
    std::string offset, lexfile, type;
    fields >> offset >> lexfile >> type;
    D5_CHECK(offset.size() == 8 && offset.find_first_not_of("0123456789") == std::string::npos, FormatError,
             "{}:{}: synset offset '{}' is not 8 decimal digits", what, line_no, offset);
    D5_CHECK(lexfile.size() == 2 && lexfile.find_first_not_of("0123456789") == std::string::npos, FormatError,
             "{}:{}: lex_filenum '{}' is not 2 decimal digits", what, line_no, lexfile);
    D5_CHECK(type.size() == 1 && std::string("nvasr").find(type[0]) != std::string::npos, FormatError,
             "{}:{}: ss_type '{}' is none of n, v, a, s, r", what, line_no, type);
    WordNetSynset s;
    s.lexicographer_file = std::stoi(lexfile);
    D5_CHECK(s.lexicographer_file < lexfiles, FormatError, "{}:{}: lex_filenum {} is outside lexnames(5)'s 0-{}",
             what, line_no, s.lexicographer_file, lexfiles - 1);
    // Satellite adjectives ("s") share the adjective files' offsets with head adjectives ("a").
    s.id = (type == "s" ? std::string("a") : type) + offset;
    s.definition = definition_of(line.substr(bar + 3));
    D5_CHECK(!s.definition.empty(), FormatError, "{}:{}: synset {} has an empty gloss", what, line_no, s.id);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> wordnet_data_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const char* f : kDataFiles) files.push_back((std::filesystem::path(dir) / f).string());
  return files;
}

std::vector<WordNetSynset> read_wordnet(const std::string& dir) {
  std::vector<WordNetSynset> all;
  for (const auto& path : wordnet_data_files(dir)) {
    std::ifstream in(path, std::ios::binary);
    D5_CHECK(in.good(), IoError,
             "WordNet's '{}' is missing: install Debian's wordnet-base (apt-get install wordnet-base) or pass "
             "wordnet-dir= with the directory holding data.noun, data.verb, data.adj and data.adv",
             path);
    std::ostringstream text;
    text << in.rdbuf();
    auto part = parse_wordnet_data(text.str(), path);
    all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return all;
}

}  // namespace d5::text
