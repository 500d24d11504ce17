// A d5 built without SQLite: the result history refuses, naming the package.
#include "deep500/core/error.h"
#include "deep500/history/result_db.h"

namespace d5 {

struct ResultDb::Impl {};

ResultDb::ResultDb(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultDb::ResultDb(ResultDb&&) noexcept = default;
ResultDb& ResultDb::operator=(ResultDb&&) noexcept = default;
ResultDb::~ResultDb() = default;

ResultDb ResultDb::open(const std::string& path) {
  D5_THROW(NotBuilt, "result database {}: this d5 was built without SQLite, so it has no result history "
           "(Debian: libsqlite3-dev, then rebuild)", path);
}

int ResultDb::schema_version() const { return 0; }
const std::string& ResultDb::path() const {
  static const std::string none;
  return none;
}
ImportOutcome ResultDb::import_file(const std::string&, const ImportOptions&) { return {}; }
SubmitOutcome ResultDb::add_submission(const Submission&) { return {}; }
std::vector<DbSubmission> ResultDb::submissions(const std::string&) const { return {}; }
std::vector<DbRun> ResultDb::runs(const DbFilter&) const { return {}; }
std::vector<DbMeasurement> ResultDb::measurements(const DbFilter&) const { return {}; }

}  // namespace d5
