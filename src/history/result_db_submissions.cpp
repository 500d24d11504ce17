// Submissions in the result history (docs/db.md#submissions): a checked bundle's files stored as
// runs and the submission beside them, in one transaction.
#include <fmt/format.h>

#include "core/digest.h"
#include "deep500/core/system_info.h"
#include "sqlite_db.h"

namespace d5 {

SubmitOutcome ResultDb::add_submission(const Submission& s) {
  D5_CHECK_ARG(!s.files.empty() && s.files.front().name == "run.json",
               "a submission's files start with its run.json (check_bundle lists them so)");
  // Read and parsed before the write lock is taken: other importers wait for as short as can be.
  std::vector<std::pair<std::string, Results>> contents;
  for (const BundleFile& f : s.files) {
    const std::string bytes = read_bytes(f.path);
    if (sha256_hex(bytes) != f.sha256)
      D5_THROW(IoError, "{} changed after it was checked (SHA-256 no longer {}); submit the bundle again", f.path,
               f.sha256.substr(0, 12));
    contents.emplace_back(f.path, parse_result_bytes(f.path, bytes));
  }
  sqlite3* db = impl_->db;
  Transaction t(db);
  SubmitOutcome out;
  {
    Statement known(db, "SELECT count(*) FROM submissions WHERE id = ?");
    known.bind(1, s.id);
    if (known.step() && known.integer(0) > 0) return out;
  }
  Statement add_file(db, "INSERT INTO submission_files(submission_id, name, run_hash) VALUES (?, ?, ?)");
  for (size_t i = 0; i < s.files.size(); ++i) {
    out.files += import_result(db, contents[i].first, s.files[i].sha256, contents[i].second).added;
    add_file.reset();
    add_file.bind(1, s.id).bind(2, s.files[i].name).bind(3, s.files[i].sha256);
    add_file.step();
  }
  Statement add(db,
                "INSERT INTO submissions(id, recipe, recipe_hash, division, submitter, system, submitted_utc, "
                "summary_run, score_quantity, lower_is_better, score, score_detail, validity, invalid_reasons, "
                "outputs_verified, backends, score_unit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  add.bind(1, s.id).bind(2, s.recipe).bind(3, s.recipe_hash).bind(4, s.division).bind(5, s.submitter);
  add.bind(6, s.system).bind(7, utc_now_iso8601()).bind(8, s.files.front().sha256).bind(9, s.score_quantity);
  add.bind(10, int64_t{s.lower_is_better}).bind(11, s.score).bind(12, s.score_detail).bind(13, s.validity);
  add.bind(14, nlohmann::json(s.invalid_reasons).dump()).bind(15, int64_t{s.outputs_verified}).bind(16, s.backends);
  add.bind(17, s.score_unit);
  add.step();
  t.commit();
  out.added = true;
  return out;
}

std::vector<DbSubmission> ResultDb::submissions(const std::string& recipe) const {
  Statement q(impl_->db,
              "SELECT s.id, s.recipe, s.recipe_hash, s.division, s.submitter, s.system, s.submitted_utc, "
              "s.summary_run, s.score_quantity, s.lower_is_better, s.score, s.score_detail, s.validity, "
              "s.invalid_reasons, s.outputs_verified, s.backends, r.start_utc, r.machine, r.cpu, r.commit_id, "
              "r.dirty, s.score_unit FROM submissions s JOIN runs r ON r.hash = s.summary_run" +
                  std::string(recipe.empty() ? "" : " WHERE s.recipe = ?") + " ORDER BY s.submitted_utc, s.id");
  if (!recipe.empty()) q.bind(1, recipe);
  std::vector<DbSubmission> out;
  while (q.step()) {
    DbSubmission d;
    Submission& s = d.submission;
    s.id = q.text(0), s.recipe = q.text(1), s.recipe_hash = q.text(2), s.division = q.text(3);
    s.submitter = q.text(4), s.system = q.text(5), d.submitted_utc = q.text(6), d.summary_run = q.text(7);
    s.score_quantity = q.text(8), s.lower_is_better = q.integer(9) != 0, s.score = q.real(10);
    s.score_detail = q.text(11), s.validity = q.text(12);
    s.invalid_reasons = nlohmann::json::parse(q.text(13)).get<std::vector<std::string>>();
    s.outputs_verified = q.integer(14) != 0, s.backends = q.text(15);
    d.start_utc = q.text(16), d.machine = q.text(17), d.cpu = q.text(18), d.commit = q.text(19);
    d.dirty = q.integer(20) != 0, s.score_unit = q.text(21);
    out.push_back(std::move(d));
  }
  Statement files(impl_->db, "SELECT name, run_hash FROM submission_files WHERE submission_id = ? ORDER BY "
                             "name = 'run.json' DESC, name");
  for (auto& d : out) {
    files.reset();
    files.bind(1, d.submission.id);
    while (files.step()) d.submission.files.push_back({files.text(0), "", files.text(1)});
  }
  return out;
}

}  // namespace d5
