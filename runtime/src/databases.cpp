// The library's tuning databases: an overlay over a base.
#include "databases.hpp"

#include <algorithm>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {

Databases::Databases(std::filesystem::path base, std::optional<std::filesystem::path> overlay) {
  if (overlay) readers_.push_back({std::move(*overlay), nullptr, false});
  readers_.push_back({std::move(base), nullptr, false});
}

TuningDb* Databases::open(Reader& reader) {
  if (reader.opened) return reader.db.get();
  reader.opened = true;
  if (!std::filesystem::exists(reader.path)) return nullptr;
  try {
    reader.db = std::make_unique<TuningDb>(reader.path, TuningDb::Mode::read_only);
  } catch (const Error& e) {
    log().warn("tuning database {} not used ({}); using the built-in defaults",
               reader.path.string(), e.what());
  }
  return reader.db.get();
}

// Appends each readable file's rows; a file that fails a query (a damaged one can open fine and
// fail only here) is said once and dropped.
template <class Rows, class Query>
void Databases::gather(Rows& out, Query&& query) {
  for (Reader& reader : readers_) {
    TuningDb* db = open(reader);
    if (!db) continue;
    try {
      auto rows = query(*db);
      out.insert(out.end(), std::make_move_iterator(rows.begin()),
                 std::make_move_iterator(rows.end()));
    } catch (const Error& e) {
      log().warn("tuning database {} cannot be read ({}); using the built-in defaults",
                 reader.path.string(), e.what());
      reader.db.reset();
    }
  }
}

std::vector<TieredBest> Databases::bests_for(const DeviceKey& device, const Problem& problem) {
  std::vector<TieredBest> out;
  gather(out, [&](TuningDb& db) { return db.bests_for(device, problem); });
  std::stable_sort(out.begin(), out.end(),
                   [](const TieredBest& a, const TieredBest& b) { return a.tier < b.tier; });
  return out;
}

std::vector<BestRecord> Databases::bests_like(const DeviceKey& device, const Problem& like) {
  std::vector<BestRecord> out;
  gather(out, [&](TuningDb& db) { return db.bests_like(device, like); });
  return out;
}

void Databases::reopen_missing() {
  for (Reader& reader : readers_)
    if (!reader.db) reader.opened = false;
}

void Databases::reset() {
  for (Reader& reader : readers_) {
    reader.db.reset();
    reader.opened = false;
  }
}

}  // namespace gemmtune
