#include "schema.hpp"

#include <unistd.h>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/util.hpp"
#include "sql.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

// 'GTDB', as set by migration 1 of schema.sql.
constexpr int64_t kApplicationId = 1196704834;

int count_migrations() {
  int count = 0;
  for (size_t at = 0; (at = schema_sql().find("\n-- migration ", at)) != std::string_view::npos;
       ++at)
    ++count;
  return count;
}

struct FileState {
  int64_t application_id = 0;
  int64_t version = 0;
  int64_t objects = 0;  // tables, indexes, ...
};

FileState read_state(sqlite3* db) {
  sql::Statement s(db,
                   "SELECT (SELECT application_id FROM pragma_application_id),"
                   " (SELECT user_version FROM pragma_user_version),"
                   " (SELECT count(*) FROM sqlite_schema)");
  s.step();
  return {s.integer(0), s.integer(1), s.integer(2)};
}

// The file's schema version, after making sure that it is ours and not newer than this build.
int checked_version(sqlite3* db, const fs::path& path) {
  const FileState state = read_state(db);
  const bool fresh = state.application_id == 0 && state.version == 0 && state.objects == 0;
  GT_REQUIRE(fresh || state.application_id == kApplicationId, Errc::database,
             "{} is an SQLite database of another program, not a gemmtune tuning database "
             "(application_id {}); pass another --db or set GEMMTUNE_DB",
             path.string(), state.application_id);
  GT_REQUIRE(state.version <= TuningDb::kSchemaVersion, Errc::database,
             "{} has schema version {}, newer than this build of gemmtune reads ({}); "
             "upgrade gemmtune or use another database file",
             path.string(), state.version, TuningDb::kSchemaVersion);
  return int(state.version);
}

// A folder this process cannot write (a read-only mount, a model's shared folder): SQLite cannot
// make WAL's -shm file beside the database there, so it must be told the file cannot change.
bool in_read_only_folder(const fs::path& path) {
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  return ::access(folder.c_str(), W_OK) != 0;
}

// "file:/a/b.db?immutable=1", with the characters a URI gives meaning to escaped.
std::string immutable_uri(const fs::path& path) {
  std::string uri = "file:";
  for (const char c : fs::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#')
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else
      uri += c;
  }
  return uri + "?immutable=1";
}

sqlite3* open_connection(const fs::path& path, bool read_only) {
  if (read_only) {
    GT_REQUIRE(fs::exists(path), Errc::database,
               "no tuning database at {} yet (nothing has been tuned there)", path.string());
  } else if (path.has_parent_path()) {
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    GT_REQUIRE(!error, Errc::database, "cannot create the folder of the database {}: {}",
               path.string(), error.message());
  }
  const bool immutable = read_only && in_read_only_folder(path);
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* db = nullptr;
  const int result = immutable ? sqlite3_open_v2(immutable_uri(path).c_str(), &db,
                                                 flags | SQLITE_OPEN_URI, nullptr)
                               : sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (result != SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : sqlite3_errstr(result);
    sqlite3_close_v2(db);
    GT_THROW(Errc::database, "cannot open the database {}: {}: {}", path.string(),
             sql::error_name(result), why);
  }
  return db;
}

// Foreign keys off while it lives. A migration that rebuilds a table drops the old one, and with
// them on that drop would delete every row referring to it (ON DELETE CASCADE). The pragma is a
// no-op inside a transaction, so this wraps the migrations' transactions, never the reverse.
class ForeignKeysOff {
 public:
  explicit ForeignKeysOff(sqlite3* db) : db_(db) { sql::exec(db_, "PRAGMA foreign_keys = OFF"); }
  // On failure too: the connection may be used after a caught error. Outside a transaction the
  // pragma cannot fail.
  ~ForeignKeysOff() { sqlite3_exec(db_, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr); }
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;

 private:
  sqlite3* db_;
};

// With foreign keys off nothing else notices a row left pointing at nothing: refuse to commit it.
void check_foreign_keys(sqlite3* db, const fs::path& path, int number) {
  sql::Statement s(db, "PRAGMA foreign_key_check");
  if (!s.step()) return;
  GT_THROW(Errc::database,
           "{} cannot be upgraded to schema version {}: row {} of table {} refers to a row of {} "
           "that does not exist (PRAGMA foreign_key_check); the file was left at version {}: "
           "restore a copy, or move it away (gemm-tune then starts a new database)",
           path.string(), number, s.integer(1), s.text(0), s.text(2), number - 1);
}

void migrate(sqlite3* db, const fs::path& path) {
  const ForeignKeysOff foreign_keys_off(db);
  for (int number = 1; number <= TuningDb::kSchemaVersion; ++number) {
    sql::Transaction transaction(db);
    // Another process may have migrated since we looked: decide under the write lock.
    if (checked_version(db, path) >= number) continue;
    sql::exec(db, migration_sql(number));
    check_foreign_keys(db, path, number);
    sql::exec(db, fmt::format("PRAGMA user_version = {}", number));
    transaction.commit();
  }
}

// Before anything is written: writing into a damaged file could only damage it more. (Readers
// skip the scan; a damaged page fails their query, and the library then does without the file.)
void check_integrity(sqlite3* db, const fs::path& path) {
  sql::Statement s(db, "PRAGMA quick_check(1)");
  s.step();
  const std::string result = s.text(0);
  GT_REQUIRE(result == "ok", Errc::database,
             "{} is damaged (SQLite's quick_check: {}): move it away (gemm-tune then starts a new "
             "database) or restore a copy",
             path.string(), result);
}

void configure_and_migrate(sqlite3* db, const fs::path& path, bool read_only) {
  GT_SQL(db, sqlite3_busy_timeout(db, sql::kBusyTimeoutMs));
  sql::exec(db, "PRAGMA foreign_keys = ON");
  // Check before writing anything: switching the journal mode would alter a foreign file.
  const int version = checked_version(db, path);
  if (read_only) {
    GT_REQUIRE(version == TuningDb::kSchemaVersion, Errc::database,
               "{} has schema version {}, older than this build's {}: open it once with write "
               "access (any gemm-tune run, or gemm-db stats) to upgrade it",
               path.string(), version, TuningDb::kSchemaVersion);
    return;
  }
  check_integrity(db, path);
  // WAL: readers never wait for the writer, and several tuning processes can share a file.
  sql::exec_waiting(db, "PRAGMA journal_mode = WAL");
  // With WAL, NORMAL loses no committed candidate when a process dies, only on power loss.
  sql::exec(db, "PRAGMA synchronous = NORMAL");
  if (version < TuningDb::kSchemaVersion) migrate(db, path);
}

}  // namespace

std::string migration_sql(int number) {
  const std::string_view text = schema_sql();
  const std::string marker = fmt::format("\n-- migration {}\n", number);
  const size_t begin = text.find(marker);
  GT_REQUIRE(begin != std::string_view::npos, Errc::internal,
             "schema.sql has no '-- migration {}' section", number);
  const size_t end = text.find("\n-- migration ", begin + marker.size() - 1);
  return std::string(text.substr(begin, end == std::string_view::npos ? end : end - begin));
}

int user_version(sqlite3* db) {
  sql::Statement s(db, "PRAGMA user_version");
  s.step();
  return int(s.integer(0));
}

sqlite3* open_database(const fs::path& path, bool read_only) {
  GT_REQUIRE(count_migrations() == TuningDb::kSchemaVersion, Errc::internal,
             "schema.sql has {} migrations but kSchemaVersion is {}", count_migrations(),
             TuningDb::kSchemaVersion);
  sqlite3* db = open_connection(path, read_only);
  try {
    configure_and_migrate(db, path, read_only);
  } catch (...) {
    sqlite3_close_v2(db);
    throw;
  }
  return db;
}

}  // namespace gemmtune
