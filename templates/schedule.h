// Work decomposition of a GEMM launch over its workers (persistent CTAs or clusters, or one
// worker per CTA): which output tiles, and which k-blocks of each, every worker computes.
// Plain C++ that compiles both in kernels (NVRTC) and on the host, so that a CPU test checks
// the very function the kernels use: every (tile, k-block) is covered exactly once.
//
// Modes:
//   DATA_PARALLEL  worker w takes whole tiles w, w + W, w + 2W, ...
//   SPLIT_K        every tile is cut into S k-ranges ("parts"); unit u = part * tiles + tile goes
//                  to worker u % W: workers running together share k-ranges (and operand rows in
//                  L2). Partial sums of a tile are reduced by its last part to finish.
//   STREAM_K       hybrid: when the tiles do not fill whole waves of W workers, the first
//                  sk_tiles tiles (one or two waves' worth) are cut into W equal runs of k-blocks,
//                  one per worker, across tile boundaries; the remaining whole waves are
//                  data-parallel. A worker's run touches at most two tiles partially.
//
// A tile computed in several parts is reduced deterministically: every part writes its fp32
// partial sums to its workspace slot and counts itself on the tile's counter; the part that
// arrives last adds the partials in part order (0, 1, ...), so the result is bitwise the same
// whichever part finishes last.
//
// 32-bit arithmetic throughout (64-bit division is a slow subroutine call in kernels): callers
// keep tiles * splits and sk_tiles * k_blocks * workers below 2^31 (fits_in_int below).
#pragma once

#include "host_device.h"

namespace gemmtune {
namespace schedule {

enum Mode { DATA_PARALLEL = 0, SPLIT_K = 1, STREAM_K = 2 };

struct Work {
  int mode;
  int tiles;       // output tiles (work units: cluster-sized groups of tiles for clusters)
  int k_blocks;    // k-blocks of one tile
  int workers;     // W
  int splits;      // SPLIT_K: parts per tile, 1 <= S <= k_blocks
  int sk_tiles;    // STREAM_K: tiles 0 .. sk_tiles-1 are stream-K, the rest data-parallel
  int sk_workers;  // STREAM_K: workers with a stream-K run (min(W, sk_tiles * k_blocks))
  int sk_iters;    // STREAM_K: sk_tiles * k_blocks
};

// One piece of a worker's work: k-blocks [k_begin, k_end) of `tile`, part `part` of `parts`.
struct Segment {
  int tile;
  int k_begin, k_end;
  int part, parts;
  int slot;  // workspace slot of this part's partial sums (when parts > 1)
};

GEMMTUNE_HOST_DEVICE int min_of(int a, int b) {
  return a < b ? a : b;
}
GEMMTUNE_HOST_DEVICE int max_of(int a, int b) {
  return a > b ? a : b;
}

GEMMTUNE_HOST_DEVICE Work make_work(int mode, int tiles, int k_blocks, int workers, int splits) {
  Work w;
  w.mode = mode;
  w.tiles = tiles;
  w.k_blocks = k_blocks;
  w.workers = max_of(workers, 1);
  w.splits = mode == SPLIT_K ? max_of(1, min_of(splits, k_blocks)) : 1;
  w.sk_tiles = 0;
  if (mode == STREAM_K && tiles % w.workers != 0)
    w.sk_tiles = tiles < 2 * w.workers ? tiles : w.workers + tiles % w.workers;
  w.sk_iters = w.sk_tiles * k_blocks;
  w.sk_workers = min_of(w.sk_iters, w.workers);
  return w;
}

// Whether the 32-bit arithmetic of this file holds for a launch of at most `workers` workers.
GEMMTUNE_HOST_DEVICE bool fits_in_int(long long tiles, long long k_blocks, long long workers,
                                      long long splits) {
  const long long limit = 1ll << 31;
  return tiles * splits < limit && 2 * workers * k_blocks * workers < limit &&
         tiles * k_blocks < limit;
}

// Stream-K: the first k-iteration of worker `worker`'s run (runs are as equal as integers allow).
GEMMTUNE_HOST_DEVICE int sk_begin(const Work& w, int worker) {
  return worker * w.sk_iters / w.sk_workers;
}
// Stream-K: the worker whose run holds iteration i.
GEMMTUNE_HOST_DEVICE int sk_worker_of(const Work& w, int i) {
  return ((i + 1) * w.sk_workers - 1) / w.sk_iters;
}

// Workspace slots of partial sums, and tiles with a counter.
GEMMTUNE_HOST_DEVICE int slots(const Work& w) {
  if (w.mode == SPLIT_K && w.splits > 1) return w.tiles * w.splits;
  if (w.mode == STREAM_K) return 2 * w.sk_workers;
  return 0;
}
GEMMTUNE_HOST_DEVICE int counters(const Work& w) {
  if (w.mode == SPLIT_K && w.splits > 1) return w.tiles;
  if (w.mode == STREAM_K) return w.sk_tiles;
  return 0;
}

// Stream-K: the slot of worker `worker`'s part of `tile`: 0 for the first tile of its run, 1 for
// the last (a worker has at most these two partial tiles; tiles in between it computes whole).
GEMMTUNE_HOST_DEVICE int sk_slot(const Work& w, int worker, int tile) {
  const int first_tile = sk_begin(w, worker) / w.k_blocks;
  return 2 * worker + (tile == first_tile ? 0 : 1);
}

// The workspace slot of part `part` of `tile` (for the reduction of a tile in several parts).
GEMMTUNE_HOST_DEVICE int slot_of(const Work& w, int tile, int part) {
  if (w.mode == SPLIT_K) return tile * w.splits + part;
  const int first = sk_worker_of(w, tile * w.k_blocks);
  return sk_slot(w, first + part, tile);
}

GEMMTUNE_HOST_DEVICE int data_parallel_units(const Work& w, int first_tile, int worker) {
  const int left = w.tiles - first_tile - worker;
  return left > 0 ? (left + w.workers - 1) / w.workers : 0;
}

// How many segments worker `worker` computes.
GEMMTUNE_HOST_DEVICE int segments(const Work& w, int worker) {
  if (w.mode == SPLIT_K) {
    const int units = w.tiles * w.splits - worker;
    return units > 0 ? (units + w.workers - 1) / w.workers : 0;
  }
  if (w.mode != STREAM_K) return data_parallel_units(w, 0, worker);
  int sk = 0;
  if (worker < w.sk_workers) {
    const int begin = sk_begin(w, worker), end = sk_begin(w, worker + 1);
    sk = (end - 1) / w.k_blocks - begin / w.k_blocks + 1;
  }
  return sk + data_parallel_units(w, w.sk_tiles, worker);
}

// Whether worker `worker` computes a segment i: the condition of the kernels' loops. A
// data-parallel worker answers without the division that counting its tiles costs, on the way
// to its first load.
GEMMTUNE_HOST_DEVICE bool has_segment(const Work& w, int worker, int i) {
  if (w.mode == DATA_PARALLEL) return worker + i * w.workers < w.tiles;
  return i < segments(w, worker);
}

// Segment i (0 <= i < segments(w, worker)) of worker `worker`, in the order it computes them.
GEMMTUNE_HOST_DEVICE Segment segment(const Work& w, int worker, int i) {
  Segment s;
  s.part = 0;
  s.parts = 1;
  s.slot = -1;
  s.k_begin = 0;
  s.k_end = w.k_blocks;
  if (w.mode == SPLIT_K) {
    const int unit = worker + i * w.workers;
    s.tile = unit % w.tiles;
    s.part = unit / w.tiles;
    s.parts = w.splits;
    s.k_begin = s.part * w.k_blocks / w.splits;
    s.k_end = (s.part + 1) * w.k_blocks / w.splits;
    if (s.parts > 1) s.slot = slot_of(w, s.tile, s.part);
    return s;
  }
  int first_dp = 0;
  if (w.mode == STREAM_K) {
    first_dp = w.sk_tiles;
    if (worker < w.sk_workers) {
      const int begin = sk_begin(w, worker), end = sk_begin(w, worker + 1);
      const int first_tile = begin / w.k_blocks;
      const int sk_segments = (end - 1) / w.k_blocks - first_tile + 1;
      if (i < sk_segments) {
        s.tile = first_tile + i;
        const int tile_begin = s.tile * w.k_blocks;
        s.k_begin = max_of(begin, tile_begin) - tile_begin;
        s.k_end = min_of(end, tile_begin + w.k_blocks) - tile_begin;
        const int first = sk_worker_of(w, tile_begin);
        const int last = sk_worker_of(w, tile_begin + w.k_blocks - 1);
        s.part = worker - first;
        s.parts = last - first + 1;
        if (s.parts > 1) s.slot = sk_slot(w, worker, s.tile);
        return s;
      }
      i -= sk_segments;
    }
  }
  s.tile = first_dp + worker + i * w.workers;
  return s;
}

}  // namespace schedule
}  // namespace gemmtune
