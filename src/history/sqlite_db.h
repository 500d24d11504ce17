#pragma once
// Internal to the result history: SQLite statements, transactions and the database handle that
// result_db.cpp and result_db_submissions.cpp share.
#include <sqlite3.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "deep500/core/error.h"
#include "deep500/history/result_db.h"

namespace d5 {

// A busy database (another process importing) is waited for this long before an import fails.
inline constexpr int kBusyTimeoutMs = 60'000;

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) D5_THROW(IoError, "cannot read result file {}", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string text_at(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      D5_THROW(Internal, "result database: preparing '{}': {}", sql, sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, std::optional<double> v) {
    if (v) sqlite3_bind_double(stmt_, i, *v);
    else sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // For the next row of values: an import reuses one statement per table.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  // True while there is a row; throws on errors.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    D5_THROW(IoError, "result database: {}", sqlite3_errmsg(db_));
  }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::optional<double> real(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

inline void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string what = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    D5_THROW(IoError, "result database: {}", what);
  }
}

// Rolls back unless committed: an exception (or a failed statement) leaves nothing behind.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

struct ResultDb::Impl {
  sqlite3* db = nullptr;
  std::string path;
  int version = 0;
  ~Impl() { sqlite3_close(db); }
};

// Stores a result file's bytes (already parsed into `results`) inside the caller's transaction.
ImportOutcome import_result(sqlite3* db, const std::string& path, const std::string& hash, const Results& results);
// Parses a result file's bytes; FormatError naming `path` when they are not one.
Results parse_result_bytes(const std::string& path, const std::string& bytes);

}  // namespace d5
