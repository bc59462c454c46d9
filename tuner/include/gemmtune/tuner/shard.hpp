#pragma once
// Sharding a list of problems over processes on many hosts: shard I of N takes every N-th
// problem from the I-th, so the shards cover the list exactly once, and each gets a mix of the
// list's kinds of shapes. Without --shard the rank and size come from the launcher:
//   Slurm (srun)        SLURM_PROCID / SLURM_NTASKS, inside a job step only (SLURM_STEP_ID set:
//                       a batch script that calls gemm-tune itself has them too, for the job)
//   Open MPI (mpirun)   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
//   MPICH, Intel MPI    PMI_RANK / PMI_SIZE
//   torchrun and alike  RANK / WORLD_SIZE
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gemmtune {

struct Shard {
  int index = 0, count = 1;
  std::string source;  // "--shard", "SLURM_PROCID/SLURM_NTASKS", ...; empty: the whole list

  bool sharded() const { return count > 1; }
  bool contains(size_t item) const { return int(item % size_t(count)) == index; }
  // The items of a list of `size` that this shard takes, in order.
  std::vector<size_t> items(size_t size) const;

  // "I/N" with 0 <= I < N; throws Error(invalid_argument).
  static Shard parse(std::string_view text);
  // From the launcher's variables (the table above, in that order); the whole list when none
  // is set. Throws Error(invalid_argument) for values that are not a rank below the size.
  using Getenv = std::function<std::optional<std::string>(const char*)>;
  static Shard from_environment(const Getenv& getenv);
};

// A path with "%t" replaced by the shard index (srun's name for the task rank) and "%%" by "%":
// `--db tuned-%t.db` gives every shard its own database.
std::string expand_shard_pattern(std::string_view pattern, const Shard& shard);

}  // namespace gemmtune
