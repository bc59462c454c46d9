-- The gemmtune tuning database: the one source of truth for its schema. It is embedded into the
-- library at build time (cache/CMakeLists.txt) and applied by cache/src/schema.cpp.
--
-- Versioning: PRAGMA user_version is the number of the last migration applied. Opening a file
-- runs every migration numbered above it, in order, each in its own transaction together with
-- its version bump, with foreign keys off (so that a table can be rebuilt without cascading) and
-- PRAGMA foreign_key_check before the commit. A released migration is never edited: append a new
-- one and raise TuningDb::kSchemaVersion. Unknown values are NULL (the C++ structs use -1).
-- docs/DATABASE.md describes the tables for users.

-- migration 1
-- Devices, problems, every measured candidate, and the best per template version.
PRAGMA application_id = 1196704834;  -- 'GTDB': tells our files from other SQLite files

CREATE TABLE devices (
  id     INTEGER PRIMARY KEY,
  name   TEXT    NOT NULL,                  -- "NVIDIA H100 80GB HBM3"
  cc     INTEGER NOT NULL CHECK (cc > 0),   -- compute capability, major * 10 + minor
  sms    INTEGER NOT NULL CHECK (sms > 0),
  driver INTEGER NOT NULL,                  -- cuDriverGetVersion, e.g. 13000
  nvrtc  TEXT    NOT NULL,                  -- "13.0"
  UNIQUE (name, cc, sms, driver, nvrtc)
);

CREATE TABLE problems (
  id     INTEGER PRIMARY KEY,
  dtype  TEXT    NOT NULL CHECK (dtype IN ('f32', 'f16', 'bf16')),
  layout TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m      INTEGER NOT NULL CHECK (m > 0),
  n      INTEGER NOT NULL CHECK (n > 0),
  k      INTEGER NOT NULL CHECK (k > 0),
  lda    INTEGER NOT NULL CHECK (lda > 0),
  ldb    INTEGER NOT NULL CHECK (ldb > 0),
  ldc    INTEGER NOT NULL CHECK (ldc > 0),
  align  INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  UNIQUE (dtype, layout, m, n, k, lda, ldb, ldc, align)
);

-- Every candidate measured, failures included: a failure is a result too.
CREATE TABLE candidates (
  id               INTEGER PRIMARY KEY,
  device_id        INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
  problem_id       INTEGER NOT NULL REFERENCES problems (id) ON DELETE CASCADE,
  template_version TEXT    NOT NULL,  -- hash of the family's template sources
  kernel_name      TEXT    NOT NULL,
  config           TEXT    NOT NULL,  -- KernelConfig::to_json(): family, dtype, layout, params
  status           TEXT    NOT NULL CHECK (status IN ('ok', 'compile_error', 'out_of_resources',
                                                      'wrong_result', 'fault', 'timeout')),
  registers        INTEGER,           -- per thread, from the ptxas report
  spills           INTEGER,           -- spill stores + loads, bytes
  smem_bytes       INTEGER,
  compile_ms       REAL,
  median_ms        REAL,              -- the timings are NULL unless status = 'ok'
  min_ms           REAL,
  max_ms           REAL,
  runs             INTEGER NOT NULL DEFAULT 0,
  tflops           REAL,
  max_error        REAL,              -- normalized error against the reference
  message          TEXT    NOT NULL DEFAULT '',  -- why it failed
  measured_at      TEXT    NOT NULL,  -- UTC, ISO 8601
  UNIQUE (device_id, problem_id, template_version, kernel_name)
);

-- The winner per device, problem and template version: results of another template version
-- stay visible (stale) but are never used.
CREATE TABLE best (
  device_id        INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
  problem_id       INTEGER NOT NULL REFERENCES problems (id) ON DELETE CASCADE,
  template_version TEXT    NOT NULL,  -- the winner's
  candidate_id     INTEGER NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,
  baseline_ms      REAL,              -- cuBLAS on the same problem in the same run
  complete         INTEGER NOT NULL CHECK (complete IN (0, 1)),  -- whole search space measured
  tuned_at         TEXT    NOT NULL,  -- UTC, ISO 8601
  PRIMARY KEY (device_id, problem_id, template_version)
);

-- migration 2
-- The family as a column of its own (version 1 kept it only inside the config JSON), so that
-- which family won and the counts per family need no JSON parsing; filled in from the config.
ALTER TABLE candidates ADD COLUMN family TEXT NOT NULL DEFAULT '';
UPDATE candidates SET family = coalesce(json_extract(config, '$.family'), '');
CREATE INDEX candidates_by_family ON candidates (family, template_version);
-- Deleting candidates cascades into best: without this index every delete scans best.
CREATE INDEX best_by_candidate ON best (candidate_id);

-- migration 3
-- problems.reads_c: whether C is read (beta != 0). Reading C moves more bytes and changes which
-- kernel is fastest, so such problems are tuned and stored apart: reads_c joins the key.
-- SQLite cannot alter a UNIQUE constraint, so the table is rebuilt as
-- https://www.sqlite.org/lang_altertable.html ("Making Other Kinds Of Table Schema Changes")
-- describes. It runs with foreign keys off (schema.cpp): with them on, dropping the old table
-- would delete every candidate and best row (ON DELETE CASCADE). The rows keep their ids, so
-- candidates and best still point at them; schema.cpp runs PRAGMA foreign_key_check before the
-- commit. The new table is renamed to the old name rather than the old table renamed away:
-- with legacy_alter_table off (SQLite's default since 3.26) renaming problems would rewrite the
-- REFERENCES problems of candidates and best to follow the old table; this way they are left as
-- they are, under either setting, and name the new table.
-- Existing rows get reads_c = 0, gemm-tune's default (beta = 0); a run with another --beta was
-- stored under the same key and cannot be told apart any more.
CREATE TABLE problems_new (
  id      INTEGER PRIMARY KEY,
  dtype   TEXT    NOT NULL CHECK (dtype IN ('f32', 'f16', 'bf16')),
  layout  TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m       INTEGER NOT NULL CHECK (m > 0),
  n       INTEGER NOT NULL CHECK (n > 0),
  k       INTEGER NOT NULL CHECK (k > 0),
  lda     INTEGER NOT NULL CHECK (lda > 0),
  ldb     INTEGER NOT NULL CHECK (ldb > 0),
  ldc     INTEGER NOT NULL CHECK (ldc > 0),
  align   INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  UNIQUE (dtype, layout, m, n, k, lda, ldb, ldc, align, reads_c)
);
INSERT INTO problems_new (id, dtype, layout, m, n, k, lda, ldb, ldc, align)
  SELECT id, dtype, layout, m, n, k, lda, ldb, ldc, align FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;
-- problems had no index of its own besides its UNIQUE key, which the new table brings along.

-- migration 4
-- Data types per operand: problems.dtype (one type of every operand) becomes type_a, type_b,
-- type_c, type_d and type_acc, and the problem's scaling mode joins the key. A row of dtype T
-- keeps its meaning: every operand T with f32 accumulation, unscaled (all that gemmtune computed
-- before this migration). The table is rebuilt as migration 3 describes, keeping its ids. The
-- scaling has no CHECK: the modes grow with the kernels, and rows are validated before use.
CREATE TABLE problems_new (
  id       INTEGER PRIMARY KEY,
  type_a   TEXT    NOT NULL CHECK (type_a IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_b   TEXT    NOT NULL CHECK (type_b IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_c   TEXT    NOT NULL CHECK (type_c IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_d   TEXT    NOT NULL CHECK (type_d IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_acc TEXT    NOT NULL CHECK (type_acc IN ('f32', 'f16')),
  scaling  TEXT    NOT NULL DEFAULT 'none',
  layout   TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m        INTEGER NOT NULL CHECK (m > 0),
  n        INTEGER NOT NULL CHECK (n > 0),
  k        INTEGER NOT NULL CHECK (k > 0),
  lda      INTEGER NOT NULL CHECK (lda > 0),
  ldb      INTEGER NOT NULL CHECK (ldb > 0),
  ldc      INTEGER NOT NULL CHECK (ldc > 0),
  align    INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c  INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  UNIQUE (type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc, align,
          reads_c)
);
INSERT INTO problems_new (id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k,
                          lda, ldb, ldc, align, reads_c)
  SELECT id, dtype, dtype, dtype, dtype, 'f32', 'none', layout, m, n, k, lda, ldb, ldc, align,
         reads_c FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;

-- migration 5
-- problems.groups: a grouped GEMM (a mixture-of-experts layer, issue 34) of G groups that share
-- M, K, the types and the layout and split the N columns between them; 0 is one GEMM. A grouped
-- problem runs other kernels than one GEMM of the same sizes, so groups joins the key. The table
-- is rebuilt as migration 3 describes, keeping its ids; every existing row is one GEMM (0).
CREATE TABLE problems_new (
  id       INTEGER PRIMARY KEY,
  type_a   TEXT    NOT NULL CHECK (type_a IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_b   TEXT    NOT NULL CHECK (type_b IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_c   TEXT    NOT NULL CHECK (type_c IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_d   TEXT    NOT NULL CHECK (type_d IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_acc TEXT    NOT NULL CHECK (type_acc IN ('f32', 'f16')),
  scaling  TEXT    NOT NULL DEFAULT 'none',
  layout   TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m        INTEGER NOT NULL CHECK (m > 0),
  n        INTEGER NOT NULL CHECK (n > 0),  -- the columns of all groups
  k        INTEGER NOT NULL CHECK (k > 0),
  lda      INTEGER NOT NULL CHECK (lda > 0),
  ldb      INTEGER NOT NULL CHECK (ldb > 0),
  ldc      INTEGER NOT NULL CHECK (ldc > 0),
  align    INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c  INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  groups   INTEGER NOT NULL DEFAULT 0 CHECK (groups >= 0),  -- 0: one GEMM, else G groups
  UNIQUE (type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc, align,
          reads_c, groups)
);
INSERT INTO problems_new (id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k,
                          lda, ldb, ldc, align, reads_c)
  SELECT id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc,
         align, reads_c FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;

-- migration 6
-- problems.group_layout: how a grouped problem's G values in device memory split its columns:
-- 'contiguous', the groups' ends (all that migration 5 knew), or 'masked', each group's count of
-- its fixed capacity of n / G columns (DeepGEMM's layout for decode under CUDA graphs). Masked
-- kernels skip the columns past a count, so the layouts are tuned apart and group_layout joins the
-- key. One GEMM is always 'contiguous'. No CHECK of the names, as for scaling: the layouts grow
-- with the kernels, and rows are validated before use. The table is rebuilt as migration 3
-- describes, keeping its ids; every existing row is 'contiguous'.
CREATE TABLE problems_new (
  id           INTEGER PRIMARY KEY,
  type_a       TEXT    NOT NULL CHECK (type_a IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_b       TEXT    NOT NULL CHECK (type_b IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_c       TEXT    NOT NULL CHECK (type_c IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_d       TEXT    NOT NULL CHECK (type_d IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_acc     TEXT    NOT NULL CHECK (type_acc IN ('f32', 'f16')),
  scaling      TEXT    NOT NULL DEFAULT 'none',
  layout       TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m            INTEGER NOT NULL CHECK (m > 0),
  n            INTEGER NOT NULL CHECK (n > 0),  -- the columns of all groups
  k            INTEGER NOT NULL CHECK (k > 0),
  lda          INTEGER NOT NULL CHECK (lda > 0),
  ldb          INTEGER NOT NULL CHECK (ldb > 0),
  ldc          INTEGER NOT NULL CHECK (ldc > 0),
  align        INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c      INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  groups       INTEGER NOT NULL DEFAULT 0 CHECK (groups >= 0),  -- 0: one GEMM, else G groups
  group_layout TEXT    NOT NULL DEFAULT 'contiguous'
                       CHECK (group_layout = 'contiguous' OR groups > 0),  -- only groups have one
  UNIQUE (type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc, align,
          reads_c, groups, group_layout)
);
INSERT INTO problems_new (id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k,
                          lda, ldb, ldc, align, reads_c, groups)
  SELECT id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc,
         align, reads_c, groups FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;

-- migration 7
-- problems.accumulation: how a float8 product is summed. 'precise' (all that migration 6 knew)
-- promotes every few 128-deep K blocks into f32; 'fast' lets the tensor cores accumulate the whole
-- K (cuBLASLt's FAST_ACCUM, torch's use_fast_accum). The two are different kernels with a
-- different error, so they are tuned apart and accumulation joins the key. Only float8 problems
-- with tensor or row scaling (only float8 is scaled) may be 'fast': block scales multiply each K
-- block's sum, which is a promotion already; every other problem is 'precise', as the CHECK
-- keeps it. No CHECK of the names, as for scaling. The table is rebuilt as migration 3
-- describes, keeping its ids; every existing row is 'precise'.
CREATE TABLE problems_new (
  id           INTEGER PRIMARY KEY,
  type_a       TEXT    NOT NULL CHECK (type_a IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_b       TEXT    NOT NULL CHECK (type_b IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_c       TEXT    NOT NULL CHECK (type_c IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_d       TEXT    NOT NULL CHECK (type_d IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_acc     TEXT    NOT NULL CHECK (type_acc IN ('f32', 'f16')),
  scaling      TEXT    NOT NULL DEFAULT 'none',
  layout       TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m            INTEGER NOT NULL CHECK (m > 0),
  n            INTEGER NOT NULL CHECK (n > 0),  -- the columns of all groups
  k            INTEGER NOT NULL CHECK (k > 0),
  lda          INTEGER NOT NULL CHECK (lda > 0),
  ldb          INTEGER NOT NULL CHECK (ldb > 0),
  ldc          INTEGER NOT NULL CHECK (ldc > 0),
  align        INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c      INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  groups       INTEGER NOT NULL DEFAULT 0 CHECK (groups >= 0),  -- 0: one GEMM, else G groups
  group_layout TEXT    NOT NULL DEFAULT 'contiguous'
                       CHECK (group_layout = 'contiguous' OR groups > 0),  -- only groups have one
  accumulation TEXT    NOT NULL DEFAULT 'precise'
                       CHECK (accumulation = 'precise' OR scaling IN ('tensor', 'row')),
  UNIQUE (type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc, align,
          reads_c, groups, group_layout, accumulation)
);
INSERT INTO problems_new (id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k,
                          lda, ldb, ldc, align, reads_c, groups, group_layout)
  SELECT id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc,
         align, reads_c, groups, group_layout FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;

-- migration 8
-- problems.epilogue: what the store applies beyond alpha and beta, D = act(alpha AB + beta C +
-- bias), as Epilogue::name() writes it: 'none' (all that migration 7 knew), else its parts
-- joined by commas ('bias', 'bias_n', then the activation: 'bias,gelu', 'silu'). Each is another
-- kernel (the bias is read and the activation applied in its store), so epilogue joins the key.
-- No CHECK of the names, as for scaling: the epilogues grow with the kernels, and rows are
-- validated before use. Nor of grouped problems, which have none yet: that is validate()'s
-- limit of today, and a CHECK would take another rebuild to lift. The table is rebuilt as the
-- comment of migration 3 describes, keeping its ids; every existing row is 'none'.
CREATE TABLE problems_new (
  id           INTEGER PRIMARY KEY,
  type_a       TEXT    NOT NULL CHECK (type_a IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_b       TEXT    NOT NULL CHECK (type_b IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_c       TEXT    NOT NULL CHECK (type_c IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_d       TEXT    NOT NULL CHECK (type_d IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_acc     TEXT    NOT NULL CHECK (type_acc IN ('f32', 'f16')),
  scaling      TEXT    NOT NULL DEFAULT 'none',
  layout       TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m            INTEGER NOT NULL CHECK (m > 0),
  n            INTEGER NOT NULL CHECK (n > 0),  -- the columns of all groups
  k            INTEGER NOT NULL CHECK (k > 0),
  lda          INTEGER NOT NULL CHECK (lda > 0),
  ldb          INTEGER NOT NULL CHECK (ldb > 0),
  ldc          INTEGER NOT NULL CHECK (ldc > 0),
  align        INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c      INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  groups       INTEGER NOT NULL DEFAULT 0 CHECK (groups >= 0),  -- 0: one GEMM, else G groups
  group_layout TEXT    NOT NULL DEFAULT 'contiguous'
                       CHECK (group_layout = 'contiguous' OR groups > 0),  -- only groups have one
  accumulation TEXT    NOT NULL DEFAULT 'precise'
                       CHECK (accumulation = 'precise' OR scaling IN ('tensor', 'row')),
  epilogue     TEXT    NOT NULL DEFAULT 'none',  -- Epilogue::name(): 'none', 'bias,gelu', ...
  UNIQUE (type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc, align,
          reads_c, groups, group_layout, accumulation, epilogue)
);
INSERT INTO problems_new (id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k,
                          lda, ldb, ldc, align, reads_c, groups, group_layout, accumulation)
  SELECT id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc,
         align, reads_c, groups, group_layout, accumulation FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;

-- migration 9
-- tune_queue: the problems running processes served without a tuned kernel, waiting for the
-- tuning daemon (gemm-tune --serve; GEMMTUNE_TUNE=background). A table rather than a socket: it
-- outlives a daemon's restart and a client's death, several processes asking for one problem
-- meet on one row (UNIQUE), and a daemon claims a row in a write transaction, so each problem
-- is tuned once. Device and problem are kept as their JSON export (json_of), not as ids into
-- devices and problems: those rows exist only for measured problems (gemm-db delete prunes the
-- others). gpu, cc and sms repeat the device's fields a daemon claims by.
CREATE TABLE tune_queue (
  id           INTEGER PRIMARY KEY,
  device       TEXT    NOT NULL,  -- json_of(DeviceKey) of the process that asked
  problem      TEXT    NOT NULL,  -- json_of(Problem)
  gpu          TEXT    NOT NULL,
  cc           INTEGER NOT NULL,
  sms          INTEGER NOT NULL,
  state        TEXT    NOT NULL DEFAULT 'queued'
                       CHECK (state IN ('queued', 'tuning', 'done', 'failed')),
  calls        INTEGER NOT NULL DEFAULT 0 CHECK (calls >= 0),  -- served untuned, as reported
  predicted_us REAL    NOT NULL DEFAULT 0 CHECK (predicted_us >= 0),  -- a call, cost model
  attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),  -- claims so far
  claimed_by   TEXT,              -- "host:pid" of the daemon tuning it
  heartbeat    REAL,              -- unix seconds of that daemon's last sign of life
  message      TEXT    NOT NULL DEFAULT '',  -- the winner, or why it failed
  requested_at TEXT    NOT NULL,  -- UTC, ISO 8601
  updated_at   TEXT    NOT NULL,
  UNIQUE (device, problem)
);
CREATE INDEX tune_queue_waiting ON tune_queue (state, gpu, cc, sms);

-- migration 10
-- problems.precision: how an f32 product is computed. 'exact' (all that migration 9 knew) runs
-- f32 fused multiply-adds on CUDA cores; 'tf32' reads each operand with a 10-bit mantissa on the
-- tensor cores (cuBLAS's FAST_TF32, torch's "high"); '3xtf32' sums three tf32 products for the
-- exact path's accuracy. Each is another kernel with another error, so they are tuned apart and
-- precision joins the key. Only problems whose every type is f32 may be other than 'exact', as
-- the CHECK keeps it. No CHECK of the names, as for scaling. The table is rebuilt as migration 3
-- describes, keeping its ids; every existing row is 'exact'. The queue's problems (json_of) gain
-- the field json_of now writes last, so that a problem queued before meets the same one asked
-- again on its row.
CREATE TABLE problems_new (
  id           INTEGER PRIMARY KEY,
  type_a       TEXT    NOT NULL CHECK (type_a IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_b       TEXT    NOT NULL CHECK (type_b IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_c       TEXT    NOT NULL CHECK (type_c IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_d       TEXT    NOT NULL CHECK (type_d IN ('f32', 'f16', 'bf16', 'e4m3', 'e5m2')),
  type_acc     TEXT    NOT NULL CHECK (type_acc IN ('f32', 'f16')),
  scaling      TEXT    NOT NULL DEFAULT 'none',
  layout       TEXT    NOT NULL CHECK (layout IN ('nn', 'nt', 'tn', 'tt')),  -- op(A) op(B)
  m            INTEGER NOT NULL CHECK (m > 0),
  n            INTEGER NOT NULL CHECK (n > 0),  -- the columns of all groups
  k            INTEGER NOT NULL CHECK (k > 0),
  lda          INTEGER NOT NULL CHECK (lda > 0),
  ldb          INTEGER NOT NULL CHECK (ldb > 0),
  ldc          INTEGER NOT NULL CHECK (ldc > 0),
  align        INTEGER NOT NULL CHECK (align IN (1, 2, 4, 8, 16)),  -- alignment class, bytes
  reads_c      INTEGER NOT NULL DEFAULT 0 CHECK (reads_c IN (0, 1)),  -- beta != 0
  groups       INTEGER NOT NULL DEFAULT 0 CHECK (groups >= 0),  -- 0: one GEMM, else G groups
  group_layout TEXT    NOT NULL DEFAULT 'contiguous'
                       CHECK (group_layout = 'contiguous' OR groups > 0),  -- only groups have one
  accumulation TEXT    NOT NULL DEFAULT 'precise'
                       CHECK (accumulation = 'precise' OR scaling IN ('tensor', 'row')),
  epilogue     TEXT    NOT NULL DEFAULT 'none',  -- Epilogue::name(): 'none', 'bias,gelu', ...
  precision    TEXT    NOT NULL DEFAULT 'exact'  -- 'exact', 'tf32' or '3xtf32'
                       CHECK (precision = 'exact' OR (type_a, type_b, type_c, type_d, type_acc) =
                                                     ('f32', 'f32', 'f32', 'f32', 'f32')),
  UNIQUE (type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc, align,
          reads_c, groups, group_layout, accumulation, epilogue, precision)
);
INSERT INTO problems_new (id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k,
                          lda, ldb, ldc, align, reads_c, groups, group_layout, accumulation,
                          epilogue)
  SELECT id, type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, k, lda, ldb, ldc,
         align, reads_c, groups, group_layout, accumulation, epilogue FROM problems;
DROP TABLE problems;
ALTER TABLE problems_new RENAME TO problems;
UPDATE tune_queue SET problem = json_set(problem, '$.precision', 'exact')
  WHERE json_type(problem, '$.precision') IS NULL;
