#include "sql.hpp"

#include <chrono>
#include <thread>

#include "gemmtune/generator/util.hpp"

namespace gemmtune::sql {

const char* error_name(int result) noexcept {
  // clang-format off
  switch (result & 0xff) {
    case SQLITE_OK: return "SQLITE_OK";
    case SQLITE_ERROR: return "SQLITE_ERROR";
    case SQLITE_INTERNAL: return "SQLITE_INTERNAL";
    case SQLITE_PERM: return "SQLITE_PERM";
    case SQLITE_ABORT: return "SQLITE_ABORT";
    case SQLITE_BUSY: return "SQLITE_BUSY";
    case SQLITE_LOCKED: return "SQLITE_LOCKED";
    case SQLITE_NOMEM: return "SQLITE_NOMEM";
    case SQLITE_READONLY: return "SQLITE_READONLY";
    case SQLITE_INTERRUPT: return "SQLITE_INTERRUPT";
    case SQLITE_IOERR: return "SQLITE_IOERR";
    case SQLITE_CORRUPT: return "SQLITE_CORRUPT";
    case SQLITE_NOTFOUND: return "SQLITE_NOTFOUND";
    case SQLITE_FULL: return "SQLITE_FULL";
    case SQLITE_CANTOPEN: return "SQLITE_CANTOPEN";
    case SQLITE_PROTOCOL: return "SQLITE_PROTOCOL";
    case SQLITE_SCHEMA: return "SQLITE_SCHEMA";
    case SQLITE_TOOBIG: return "SQLITE_TOOBIG";
    case SQLITE_CONSTRAINT: return "SQLITE_CONSTRAINT";
    case SQLITE_MISMATCH: return "SQLITE_MISMATCH";
    case SQLITE_MISUSE: return "SQLITE_MISUSE";
    case SQLITE_NOLFS: return "SQLITE_NOLFS";
    case SQLITE_AUTH: return "SQLITE_AUTH";
    case SQLITE_RANGE: return "SQLITE_RANGE";
    case SQLITE_NOTADB: return "SQLITE_NOTADB";
    case SQLITE_ROW: return "SQLITE_ROW";
    case SQLITE_DONE: return "SQLITE_DONE";
  }
  // clang-format on
  return "SQLITE_(unknown)";
}

int check(sqlite3* db, int result, const char* call, const char* file, int line) {
  if (result == SQLITE_OK || result == SQLITE_ROW || result == SQLITE_DONE) return result;
  const char* path_text = db ? sqlite3_db_filename(db, "main") : nullptr;
  const std::string path = path_text && *path_text ? path_text : "(unknown)";
  const std::string why =
      fmt::format("{}: {}", error_name(result), db ? sqlite3_errmsg(db) : sqlite3_errstr(result));
  // The two a user meets with a bad --db say what the file is and what to do about it.
  switch (result & 0xff) {
    case SQLITE_NOTADB:
      throw_error_at(
          Errc::database, file, line,
          fmt::format("{} is not an SQLite database ({}), so no gemmtune tuning database: pass "
                      "another --db or set GEMMTUNE_DB",
                      path, why));
    case SQLITE_CORRUPT:
      throw_error_at(
          Errc::database, file, line,
          fmt::format("{} is damaged ({}): move it away (gemm-tune then starts a new database) "
                      "or restore a copy",
                      path, why));
    default:
      throw_error_at(Errc::database, file, line,
                     fmt::format("database {}: {} [in {}]", path, why, call));
  }
}

void exec(sqlite3* db, const std::string& sql) {
  GT_SQL(db, sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr));
}

namespace {

int exec_until_not_busy(sqlite3* db, const char* statement) {
  using Clock = std::chrono::steady_clock;
  const auto give_up = Clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    const int result = sqlite3_exec(db, statement, nullptr, nullptr, nullptr);
    if ((result & 0xff) != SQLITE_BUSY || Clock::now() > give_up) return result;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

void exec_waiting(sqlite3* db, const char* statement) {
  GT_SQL(db, exec_until_not_busy(db, statement));
}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  GT_SQL(db_, sqlite3_prepare_v2(db_, sql.data(), int(sql.size()), &stmt_, nullptr));
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, const Value& value) {
  struct Binder {
    sqlite3_stmt* s;
    int i;
    int operator()(std::nullptr_t) const { return sqlite3_bind_null(s, i); }
    int operator()(int64_t v) const { return sqlite3_bind_int64(s, i, v); }
    int operator()(double v) const { return sqlite3_bind_double(s, i, v); }
    int operator()(const std::string& v) const {
      return sqlite3_bind_text(s, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
    }
  };
  GT_SQL(db_, std::visit(Binder{stmt_, index}, value));
  return *this;
}

Statement& Statement::bind_all(const std::vector<Value>& values, int first) {
  for (size_t i = 0; i < values.size(); ++i) bind(first + int(i), values[i]);
  return *this;
}

Statement& Statement::bind_or_null(int index, double value) {
  return value < 0 ? bind(index, nullptr) : bind(index, value);
}

bool Statement::step() {
  return GT_SQL(db_, sqlite3_step(stmt_)) == SQLITE_ROW;
}

void Statement::run() {
  while (step()) {
  }
  changes_ = sqlite3_changes(db_);
  GT_SQL(db_, sqlite3_reset(stmt_));
}

int Statement::changes() const {
  return changes_;
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::integer(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::real(int column) const {
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::text(int column) const {
  const auto* bytes = sqlite3_column_text(stmt_, column);
  return bytes ? std::string(reinterpret_cast<const char*>(bytes),
                             size_t(sqlite3_column_bytes(stmt_, column)))
               : std::string();
}

double Statement::real_or_unknown(int column) const {
  return is_null(column) ? -1 : real(column);
}

int Statement::int_or_unknown(int column) const {
  return is_null(column) ? -1 : int(integer(column));
}

Transaction::Transaction(sqlite3* db) : db_(db) {
  exec_waiting(db_, "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);  // nothing to do if it fails
}

void Transaction::commit() {
  exec(db_, "COMMIT");
  open_ = false;
}

Conditions& Conditions::add(std::string clause, std::vector<Value> values) {
  clauses_.push_back(std::move(clause));
  values_.insert(values_.end(), values.begin(), values.end());
  return *this;
}

Conditions& Conditions::add(const Conditions& other) {
  clauses_.insert(clauses_.end(), other.clauses_.begin(), other.clauses_.end());
  values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  return *this;
}

std::string Conditions::sql() const {
  if (clauses_.empty()) return "1";
  std::string out;
  for (const auto& clause : clauses_) out += (out.empty() ? "(" : " AND (") + clause + ")";
  return out;
}

}  // namespace gemmtune::sql
