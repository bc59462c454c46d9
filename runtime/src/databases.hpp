#pragma once
// The tuning databases a library reads, in order: the overlay (GEMMTUNE_DB_OVERLAY, where a
// process's new results go) and the base (GEMMTUNE_DB, possibly read-only, shipped with a
// model). Each is opened once, read-only, when first needed; a file that does not exist yet is
// looked for again after reopen_missing(); one that cannot be read is dropped with one warning.
// Not thread-safe: the library holds its lock.
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"

namespace gemmtune {

class Databases {
 public:
  // overlay: none when empty.
  Databases(std::filesystem::path base, std::optional<std::filesystem::path> overlay);

  // Every file's rows for the problem, by tier; within a tier, the overlay's first.
  std::vector<TieredBest> bests_for(const DeviceKey& device, const Problem& problem);
  // Every file's bests of the problem's kind on the device (nearest_best()'s input).
  std::vector<BestRecord> bests_like(const DeviceKey& device, const Problem& like);

  void reopen_missing();  // files that did not exist are looked for again
  void reset();           // every file is opened again when next needed

 private:
  struct Reader {
    std::filesystem::path path;
    std::unique_ptr<TuningDb> db;
    bool opened = false;
  };
  TuningDb* open(Reader& reader);
  template <class Rows, class Query>
  void gather(Rows& out, Query&& query);

  std::vector<Reader> readers_;
};

}  // namespace gemmtune
