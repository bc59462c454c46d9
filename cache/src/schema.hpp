#pragma once
// Opening a tuning database file: connection settings, ownership and version checks, and the
// numbered migrations of cache/schema.sql.
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace gemmtune {

std::string_view schema_sql();  // cache/schema.sql, embedded at build time

// Opens the file and brings it to TuningDb::kSchemaVersion (read-only: requires it). Throws
// Error(database) naming the path for files that are missing (read-only), newer than this
// build, not SQLite, or another program's SQLite database.
sqlite3* open_database(const std::filesystem::path& path, bool read_only);

int user_version(sqlite3* db);
// The SQL of migration `number`: from its "-- migration N" line to the next one.
std::string migration_sql(int number);

}  // namespace gemmtune
