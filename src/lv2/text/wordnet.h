#pragma once
// Internal: WordNet 3.0's database files (Debian's wordnet-base, /usr/share/wordnet), as wndb(5)
// describes them. Each line of data.noun, data.verb, data.adj and data.adv is one synset:
//
//   synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id ...] p_cnt ... | gloss
//
// lex_filenum (two decimal digits) names the lexicographer file the synset was filed in, one of
// the 45 of lexnames(5) ("noun.animal", "verb.motion", ...): the class of the gloss. The gloss is
// the definition, then examples in double quotes after "; ".
#include <cstdint>
#include <string>
#include <vector>

namespace d5::text {

struct WordNetSynset {
  std::string id;        // part of speech and offset, "n00001740": unique across the four files
  int lexicographer_file = 0;
  std::string definition;  // the gloss up to its first quoted example, trimmed
};

// lexnames(5): index = lex_filenum.
const std::vector<std::string>& wordnet_lexicographer_files();

// Parses one data file's text; `what` names it in errors. License lines (two leading spaces)
// are skipped. FormatError naming the file and line for a malformed synset line or a
// lexicographer file outside lexnames(5).
std::vector<WordNetSynset> parse_wordnet_data(const std::string& text, const std::string& what);

// The four data files of `dir`, nouns, verbs, adjectives, adverbs, in file order. IoError naming
// the Debian package (wordnet-base) when a file is missing.
std::vector<WordNetSynset> read_wordnet(const std::string& dir);
// The files read_wordnet reads, for checksums.
std::vector<std::string> wordnet_data_files(const std::string& dir);

}  // namespace d5::text
