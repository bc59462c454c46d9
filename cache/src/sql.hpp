#pragma once
// Thin SQLite wrappers: a check macro, prepared statements, immediate transactions.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

// Checks the result of a SQLite call; throws Error(database) with the database file, the error
// name and message, the call text and file:line. Returns the result (SQLITE_ROW, SQLITE_DONE, ...).
#define GT_SQL(db, call) ::gemmtune::sql::check((db), (call), #call, __FILE__, __LINE__)

namespace gemmtune::sql {

int check(sqlite3* db, int result, const char* call, const char* file, int line);
// "SQLITE_BUSY", "SQLITE_NOTADB", ... for the primary result code.
const char* error_name(int result) noexcept;

using Value = std::variant<std::nullptr_t, int64_t, double, std::string>;

// How long a connection waits for another process's lock before giving up.
inline constexpr int kBusyTimeoutMs = 10'000;

// Runs SQL text that may hold several statements and returns no rows.
void exec(sqlite3* db, const std::string& sql);
// Runs one statement, retrying SQLITE_BUSY for up to kBusyTimeoutMs: the busy handler covers
// lock waits, but a few paths (WAL recovery, changing the journal mode) return it at once.
void exec_waiting(sqlite3* db, const char* statement);

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are numbered from 1, as in SQLite.
  Statement& bind(int index, const Value& value);
  Statement& bind_all(const std::vector<Value>& values, int first = 1);
  // Negative numbers mean "unknown" in our structs and are stored as NULL.
  Statement& bind_or_null(int index, double value);

  bool step();          // true while a row is ready
  void run();           // steps to the end, then resets for the next binding
  int changes() const;  // rows the last run() inserted, updated or deleted

  bool is_null(int column) const;
  int64_t integer(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  double real_or_unknown(int column) const;  // NULL -> -1
  int int_or_unknown(int column) const;      // NULL -> -1

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int changes_ = 0;
};

// Reads the columns of a row in order, so that column lists and readers stay in step.
class Row {
 public:
  explicit Row(const Statement& statement, int first = 0) : s_(statement), next_(first) {}
  int64_t integer() { return s_.integer(next_++); }
  double real() { return s_.real(next_++); }
  std::string text() { return s_.text(next_++); }
  double real_or_unknown() { return s_.real_or_unknown(next_++); }
  int int_or_unknown() { return s_.int_or_unknown(next_++); }

 private:
  const Statement& s_;
  int next_;
};

// BEGIN IMMEDIATE takes the write lock up front, so a writer never fails half-way with
// SQLITE_BUSY; rolled back unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  sqlite3* db_;
  bool open_ = true;
};

// SQL conditions joined with AND, with their parameters in order.
class Conditions {
 public:
  Conditions& add(std::string clause, std::vector<Value> values = {});
  Conditions& add(const Conditions& other);
  std::string sql() const;  // "1" when empty
  const std::vector<Value>& values() const { return values_; }

 private:
  std::vector<std::string> clauses_;
  std::vector<Value> values_;
};

}  // namespace gemmtune::sql
