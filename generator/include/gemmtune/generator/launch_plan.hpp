#pragma once
// A launch plan: everything the runtime needs to launch one configuration on one problem, said by
// the family, so that the runtime provides it without knowing the family's parameters.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "gemmtune/types.hpp"
#include "kernel_args.h"

namespace gemmtune {

// D: the output, where it has a buffer of its own (otherwise C's); its leading dimension is C's.
// scale_a, scale_b: the fp32 scales of a scaled problem's A and B, which a map reads as one row of
// all their values (scale_shape_a/b's count), whatever the sides of their layout: a box starts on
// any multiple of four of them (TMA faults on a box that starts off 16 bytes) and reads zeros past
// the last.
// aux: the epilogue's pre-activation output, laid out as D.
enum class Operand { a = 0, b = 1, c = 2, d = 3, scale_a = 4, scale_b = 5, aux = 6 };
inline bool is_scales(Operand operand) {
  return operand == Operand::scale_a || operand == Operand::scale_b;
}

// The shared-memory swizzle a tensor map writes with (CUtensorMapSwizzle's modes).
enum class Swizzle { none, b32, b64, b128 };

// Whether TMA can read an operand whose columns are `ld` elements apart in place: each column
// must start on 16 bytes (its address too, which only the runtime knows). One that cannot is
// packed into an aligned copy first, when its map is required (TensorMapPlan::made_flag 0).
inline bool tma_ld_aligned(int64_t ld, DataType type) {
  return ld * element_bytes(type) % 16 == 0;
}

// What a map reads of its operand: the operand itself, or a copy that every launch derives from
// it first, in stream order, into a kept buffer (runtime/src/launcher.cpp, templates/pack.cuh),
// of an f32 A or B:
//   tf32_low:   x minus the tf32 part of x that wgmma reads, 3xTF32's small part;
//   transposed: the operand stored along K, for kernels that read it so alone (tf32 wgmma);
//   transposed_tf32_low: both.
enum class Derived { none, tf32_low, transposed, transposed_tf32_low };
inline bool is_transposed(Derived d) {
  return d == Derived::transposed || d == Derived::transposed_tf32_low;
}
inline bool is_low_part(Derived d) {
  return d == Derived::tf32_low || d == Derived::transposed_tf32_low;
}

// A 2-D TMA tensor map over one operand as it is stored (column-major, ld): the element type it
// reads, the swizzle, the box one copy moves (elements along the stored rows, which are
// contiguous, and columns), and where the kernel's argument struct holds it.
struct TensorMapPlan {
  Operand operand = Operand::a;
  DataType type = DataType::f16;
  Swizzle swizzle = Swizzle::b128;
  uint32_t box_rows = 0, box_cols = 0;
  uint32_t offset = 0;  // in the family's argument struct
  // 0: required; an operand TMA cannot read in place is packed into an aligned copy first.
  // Otherwise the map is made only where the operand is aligned, and then this bit is set in
  // GemmCore::flags (C's map for TMA stores: without it the kernel stores from registers).
  unsigned made_flag = 0;
  // A's map of a grouped problem: 3-D, over its G stored matrices (a box is of one of them), so
  // that a tile past a group's last row or K reads zeros, not the next group's values.
  bool per_group = false;
  // A's map of a gated problem (K-major A): 3-D, op(A)'s rows as D's M / 2 rows of two layers,
  // the gate part and the up part (Epilogue::gate's halves or interleaved rows); a box of
  // `box_cols` rows holds them of both layers, gate first. Rows past D's read zeros.
  bool gate_layers = false;
  // A copy derived from the operand (A or B), tightly stored, which the map reads instead.
  Derived derived = Derived::none;
};

// A copy derived from A or B that a kernel without tensor maps reads in place of the operand,
// through GemmCore's pointer and leading dimension of it (a and lda, or b and ldb): mma_sm80's
// tf32 kernels read an f32 operand stored along M or N from its transposed copy.
struct DerivedOperand {
  Operand operand = Operand::a;
  Derived derived = Derived::none;
};

// Where the parts of a family's argument struct lie (offsetof, on the host, over the same
// definition the kernel compiles), by name; the generated unit checks the struct's size.
struct ArgsLayout {
  std::string_view type;  // the struct, e.g. "WgmmaArgs"
  uint32_t bytes = 0;     // its size
  uint32_t core = 0;      // offset of its GemmCore member, named "core"
  // Every member by name and offset, for the plan's parts to name where they go.
  std::vector<std::pair<std::string_view, uint32_t>> members;
  uint32_t offset_of(std::string_view member) const;  // throws Error(internal) for unknown names
};

// A member of an argument struct by name and offset, for ArgsLayout::members.
#define GEMMTUNE_ARGS_MEMBER(type, member)    \
  std::pair<std::string_view, uint32_t> {     \
#member, uint32_t(offsetof(type, member)) \
  }

// Plain data the family passes its kernel besides what the runtime provides (the tiling of the
// launch, say), copied into the argument struct at `offset`.
struct ArgsBlock {
  uint32_t offset = 0;
  std::vector<std::byte> bytes;

  template <class T>
  static ArgsBlock of(uint32_t offset, const T& value) {
    ArgsBlock block{offset, std::vector<std::byte>(sizeof(T))};
    std::memcpy(block.bytes.data(), &value, sizeof(T));
    return block;
  }
};

struct LaunchPlan {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  std::array<uint32_t, 3> cluster{1, 1, 1};
  uint32_t smem_bytes = 0;            // dynamic shared memory
  uint32_t tiles_m = 1, tiles_n = 1;  // output tiles (the default cost model reads them)
  // Persistent kernels loop over `work_units` (tiles, or cluster-sized groups of tiles). The
  // runtime sizes their grid: no more CTAs than can be resident at once (clusters may not fit on
  // every SM), and no more than the fewest that finish in the same number of rounds (all
  // resident CTAs when work_units is 0: stream-K spreads the work over every one, and a grouped
  // launch's tiles are counted on the device alone).
  bool persistent = false;
  uint32_t work_units = 0;
  // Scratch the kernel needs (split-K partial sums), passed as GemmCore::workspace; and counters
  // (tiles reduced in parts), passed as GemmCore::counters, zero at launch and left zero by every
  // kernel. The runtime allocates both once per device and stream.
  uint64_t workspace_bytes = 0;
  uint64_t counter_bytes = 0;
  // Whether the kernel can apply beta != 0. One built for beta == 0 alone has no code that reads
  // C; the runtime refuses to launch it with beta != 0, and the verifier checks it with beta ==
  // 0 only.
  bool reads_c = true;
  std::vector<TensorMapPlan> maps;
  std::vector<DerivedOperand> derived_operands;  // read through GemmCore, not a map
  ArgsLayout args;
  std::vector<ArgsBlock> blocks;  // the family's own arguments

  const TensorMapPlan* map(Operand operand) const;
  uint32_t threads() const { return block[0] * block[1] * block[2]; }
  uint32_t cluster_size() const { return cluster[0] * cluster[1] * cluster[2]; }
};

// `ctas` as a grid's x extent; throws Error(invalid_argument) when a grid cannot hold that many
// (2^31 - 1), rather than let the count wrap. Families' plans size grids with it.
uint32_t grid_extent(int64_t ctas);

}  // namespace gemmtune
