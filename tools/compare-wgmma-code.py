#!/usr/bin/env python3
"""Checks that two versions of templates/wgmma_sm90.cuh (and everything it includes) compile to
the same machine code: for a table of configurations that covers every feature of the kernel, it
writes the unit the generator emits (generator/src/families/wgmma_sm90.cpp, emit(); family.cpp,
generated_unit()), compiles it against the OLD and the NEW template tree with nvcc for sm_90a
(the ptxas NVRTC uses) and compares each kernel's .text section byte for byte. It also reports
ptxas's spills for both (none of the table's kernels spills with nvcc), and, where the new tree
has templates/wgmma_sm90/layout.h, checks that its shared-memory size and C buffer count,
compiled as host C++, agree with the generator's own formulas (mirrored below) for every
configuration.

  tools/compare-wgmma-code.py [--old REF] [--new REF|DIR] [--compiler nvcc|nvrtc] [--jobs N]
                              [--work DIR] [--only TEXT]

  --old      a git revision whose templates/ are the reference (default b175d93)
  --new      a git revision, or a templates folder (default: this checkout's templates/)
  --compiler nvcc -cubin (default), or NVRTC through ctypes as the runtime compiles (every
             template an in-memory header, the runtime's options)
  --jobs     parallel compiles (default 2)
  --work     where units and cubins go (default a temporary folder); the old tree's cubins are
             reused from there when its revision and the compiler are the same
  --only     configurations whose kernel name contains TEXT

Each line: same/DIFFERENT (.text), cubin/----- (the whole cubin byte for byte: NVRTC's also
holds the kernel classes' static constexpr members as named data, which the split renames),
registers and spill bytes old/new, instructions, kernel.

Exits 1 when any .text differs, a kernel spills more than before, or layout.h disagrees.
"""
import argparse
import concurrent.futures
import ctypes
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMEM_PER_BLOCK = 232448  # sm_90's opt-in shared memory per block (ArchInfo::smem_per_block)
WORK_BYTES = 32  # sizeof(schedule::Work)
DP, SPLIT_K, STREAM_K = 0, 1, 2


def cfg(dtype, layout, bm, bn, *, ksub=1, stages=4, wg=2, cluster=11, ws=1, pingpong=0, raster=0,
        group=8, swap=0, schedule=DP, splits=1, cluster_k=1, epilogue=0, occupancy=1, reads_c=1):
    return dict(DTYPE=dtype, A_T=layout[0] == "t", B_T=layout[1] == "t", BM=bm, BN=bn, KSUB=ksub,
                STAGES=stages, WG=wg, CLUSTER_M=cluster // 10, CLUSTER_N=cluster % 10, WS=ws,
                PINGPONG=pingpong, RASTER=raster, GROUP=group, SWAP=swap, SCHEDULE=schedule,
                SPLITS=splits, CLUSTER_K=cluster_k, EPILOGUE=epilogue, OCCUPANCY=occupancy,
                READS_C=reads_c)


B, F = "bf16", "f16"
CONFIGS = [
    # Warp-specialized, data-parallel, TMA stores (C_BUFFERS fewer than the chunks where noted).
    cfg(B, "nn", 256, 128, cluster=12, epilogue=1),  # the default: 2 of 4 C buffers
    cfg(B, "nn", 256, 128, cluster=12, epilogue=1, reads_c=0),
    cfg(F, "tt", 256, 128, stages=3, cluster=21, epilogue=1),
    cfg(B, "tn", 192, 128, epilogue=1),  # 3 chunks
    cfg(B, "nt", 128, 256, epilogue=1),  # two 64-row blocks a warpgroup: 1 of 2 C buffers
    cfg(F, "nn", 256, 128, ksub=2, stages=2, epilogue=1),
    cfg(B, "tn", 128, 192, wg=3, epilogue=1),
    cfg(B, "nn", 128, 192, wg=3, cluster=21),
    # Ping-pong.
    cfg(B, "nt", 128, 128, stages=5, pingpong=1, epilogue=1),
    cfg(B, "tt", 128, 128, stages=5, pingpong=1),
    cfg(F, "tn", 128, 128, pingpong=1, cluster=12, epilogue=1, reads_c=0),
    cfg(B, "nn", 128, 128, pingpong=1, schedule=STREAM_K, epilogue=1),
    cfg(B, "nn", 128, 128, pingpong=1, schedule=SPLIT_K, splits=2),
    # Split-K.
    cfg(B, "tn", 128, 128, schedule=SPLIT_K, splits=3, epilogue=1),
    cfg(F, "nn", 128, 128, cluster=21, schedule=SPLIT_K, splits=2),
    cfg(B, "tn", 128, 128, wg=1, schedule=SPLIT_K, splits=2),
    cfg(B, "nt", 128, 64, wg=1, schedule=SPLIT_K, splits=4, epilogue=1),
    cfg(B, "tn", 64, 128, wg=1, swap=1, schedule=SPLIT_K, splits=2),
    cfg(B, "nn", 128, 192, wg=3, schedule=SPLIT_K, splits=2, epilogue=1, reads_c=0),
    cfg(B, "nn", 128, 128, cluster=12, schedule=SPLIT_K, splits=2, epilogue=1),
    # Stream-K.
    cfg(B, "nn", 128, 128, schedule=STREAM_K, epilogue=1, reads_c=0),
    cfg(F, "tt", 128, 128, cluster=12, schedule=STREAM_K),
    cfg(B, "tn", 128, 192, wg=3, schedule=STREAM_K),
    cfg(B, "nn", 128, 64, wg=1, schedule=STREAM_K),
    cfg(B, "tn", 128, 64, swap=1, schedule=STREAM_K),
    cfg(B, "nn", 256, 128, cluster=21, schedule=STREAM_K, epilogue=1, reads_c=0),
    cfg(F, "nt", 256, 128, cluster=12, raster=1, group=16, schedule=STREAM_K, epilogue=1),
    # Clusters of two, register stores.
    cfg(B, "nt", 128, 256, cluster=21, reads_c=0),
    cfg(B, "nn", 128, 128, cluster=12, raster=1, group=4),
    # Clusters that split K (wgmma N 8 and 16 included: CTAs that own no columns).
    cfg(B, "tn", 128, 16, wg=1, swap=1, cluster_k=4),
    cfg(B, "nn", 128, 8, swap=1, cluster_k=4),
    cfg(F, "tn", 64, 8, wg=1, swap=1, cluster_k=2, reads_c=0),
    cfg(B, "tn", 128, 16, swap=1, cluster_k=2),
    cfg(B, "tn", 64, 128, wg=1, cluster_k=2),
    cfg(B, "tn", 96, 128, cluster_k=4),
    cfg(B, "tn", 64, 192, wg=3, cluster_k=4),
    cfg(F, "tn", 128, 128, cluster_k=2),
    cfg(B, "tn", 64, 128, wg=1, cluster_k=4),
    cfg(B, "tn", 64, 32, wg=1, swap=1, cluster_k=2, occupancy=2),
    # Swapped (skinny n on wgmma's N), data-parallel.
    cfg(B, "tn", 128, 8, stages=8, swap=1),
    cfg(F, "nn", 128, 24, stages=6, swap=1, reads_c=0),
    cfg(B, "tn", 256, 40, stages=6, swap=1),
    cfg(B, "nt", 128, 64, ksub=2, cluster=21, swap=1),
    cfg(B, "tt", 128, 128, cluster=12, swap=1, reads_c=0),
    # Two 64-K blocks a stage.
    cfg(B, "nn", 128, 128, ksub=2, stages=3, epilogue=1),
    cfg(F, "tn", 128, 64, ksub=2, wg=1, schedule=STREAM_K),
    # Two CTAs an SM.
    cfg(B, "tn", 64, 128, occupancy=2),
    cfg(B, "nn", 64, 64, wg=1, epilogue=1, occupancy=2),
    cfg(F, "tn", 64, 64, wg=1, schedule=SPLIT_K, splits=2, occupancy=2),
    cfg(B, "tn", 64, 32, wg=1, swap=1, schedule=STREAM_K, occupancy=2),
    # Multistage.
    cfg(B, "nn", 128, 128, ws=0),
    cfg(B, "tt", 128, 128, wg=1, ws=0, reads_c=0),
    cfg(F, "tn", 128, 64, stages=5, wg=1, ws=0),
    cfg(B, "nt", 64, 64, stages=6, wg=1, ws=0, swap=1),
    cfg(B, "tn", 128, 16, stages=8, ws=0, swap=1),
    cfg(B, "nn", 128, 192, wg=3, ws=0),
    cfg(F, "nn", 256, 128, ksub=2, stages=2, ws=0, reads_c=0),
]


# ---- the generator's formulas (generator/src/families/wgmma_sm90.cpp) ---------------------------

def ceil_div(a, b):
    return -(-a // b)


def tile_rows(c):
    return c["BM"] if c["SWAP"] else c["BN"]


def tile_cols(c):
    return c["BN"] if c["SWAP"] else c["BM"]


def blocks_per_warpgroup(c):
    return tile_rows(c) // (64 * (1 if c["PINGPONG"] else c["WG"]))


def accumulators(c):
    return blocks_per_warpgroup(c) * tile_cols(c) // 2


def push_bytes(c):
    if c["CLUSTER_K"] == 1:
        return 0
    owned = blocks_per_warpgroup(c) * ceil_div(tile_cols(c) // 8, c["CLUSTER_K"])
    return c["WG"] * c["CLUSTER_K"] * owned * 128 * 16 + 16 * c["WG"]


def fixed_smem_bytes(c):
    return (c["STAGES"] * (tile_rows(c) + tile_cols(c)) * 64 * c["KSUB"] * 2 + 1024 +
            16 * c["STAGES"] + 16 + WORK_BYTES + push_bytes(c))


def c_buffers_bytes(c, buffers):
    return c["WG"] * (buffers * (64 * blocks_per_warpgroup(c) * 128 + 8) + 8) if buffers else 0


def c_buffers(c):
    if not c["EPILOGUE"]:
        return 0
    chunks = tile_cols(c) // 64
    for b in range(chunks, 1, -1):
        if fixed_smem_bytes(c) + c_buffers_bytes(c, b) <= SMEM_PER_BLOCK:
            return b
    return 1 if chunks > 0 else 0


def smem_bytes(c):
    return fixed_smem_bytes(c) + c_buffers_bytes(c, c_buffers(c))


def check_valid(c):
    """The generator's problem-independent constraints: the table holds only points it emits."""
    tm, tn, wg, ck = tile_rows(c), tile_cols(c), c["WG"], c["CLUSTER_K"]
    mw, acc = blocks_per_warpgroup(c), accumulators(c)
    a_kmajor, b_kmajor = c["A_T"], not c["B_T"]
    q_kmajor = b_kmajor if c["SWAP"] else a_kmajor
    cluster = c["CLUSTER_M"] * c["CLUSTER_N"]
    rules = {
        "warpgroup_rows": tm % (64 * (1 if c["PINGPONG"] else wg)) == 0 and mw in (1, 2),
        "pingpong_takes_two": not c["PINGPONG"] or (c["WS"] and wg == 2),
        "wgmma_n": tn % 8 == 0 and 8 <= tn <= 256,
        "accumulators_fit": acc <= (96 if wg == 3 else 128),
        "fixup_fits_one_warpgroup": wg != 1 or acc < 128 or c["SCHEDULE"] == DP or
                                    (c["SCHEDULE"] == SPLIT_K and tn <= 128),
        "mn_major_in_chunks": q_kmajor or tn % 64 == 0,
        "smem_fits": smem_bytes(c) <= SMEM_PER_BLOCK,
        "two_ctas_fit": c["OCCUPANCY"] == 1 or (c["OCCUPANCY"] == 2 and c["WS"] and wg <= 2 and
                                                acc <= 32 and 2 * (smem_bytes(c) + 1024) <= 233472),
        "clusters_need_ws": cluster == 1 or c["WS"],
        "cluster_k_alone": ck == 1 or (ck in (2, 4) and cluster == 1 and c["WS"] and
                                       not c["PINGPONG"] and not c["EPILOGUE"] and
                                       c["SCHEDULE"] == DP),
        "cluster_of_four_fits_registers": ck != 4 or acc <= [0, 96, 48, 32][wg],
        "shared_half_whole": not (c["CLUSTER_N"] == 2 and a_kmajor and
                                  (tm if c["SWAP"] else tn) % 16) and
                             not (c["CLUSTER_M"] == 2 and b_kmajor and
                                  (tn if c["SWAP"] else tm) % 16),
        "tma_store_layout": not c["EPILOGUE"] or (c["WS"] and not c["SWAP"] and tn % 64 == 0),
        "schedules_need_ws": c["SCHEDULE"] == DP or c["WS"],
        "splits_only_for_split_k": (c["SPLITS"] > 1) == (c["SCHEDULE"] == SPLIT_K),
    }
    broken = [name for name, holds in rules.items() if not holds]
    if broken:
        raise SystemExit(f"invalid configuration {kernel_name(c)}: {', '.join(broken)}")


def kernel_name(c):
    schedule = ""
    if c["SCHEDULE"] == SPLIT_K:
        schedule = f"_splitk{c['SPLITS']}"
    if c["SCHEDULE"] == STREAM_K:
        schedule = "_streamk"
    if c["CLUSTER_K"] > 1:
        schedule = f"_ck{c['CLUSTER_K']}"
    kind = ("pingpong" if c["PINGPONG"] else "ws") if c["WS"] else "ms"
    layout = ("t" if c["A_T"] else "n") + ("t" if c["B_T"] else "n")
    return (f"gemm_wgmma_{c['DTYPE']}_{layout}_{c['BM']}x{c['BN']}x{64 * c['KSUB']}"
            f"_s{c['STAGES']}_wg{c['WG']}_c{c['CLUSTER_M']}x{c['CLUSTER_N']}_{kind}"
            f"_r{'n' if c['RASTER'] else 'm'}{'' if c['GROUP'] == 8 else '_g%d' % c['GROUP']}"
            f"{'_swap' if c['SWAP'] else ''}{schedule}{'_tmastore' if c['EPILOGUE'] else ''}"
            f"{'_o%d' % c['OCCUPANCY'] if c['OCCUPANCY'] > 1 else ''}"
            f"{'_readsc' if c['READS_C'] else ''}")


def unit(c):
    """The generated unit, as emit() and generated_unit() write it."""
    b = lambda v: "true" if v else "false"
    name, smem = kernel_name(c), smem_bytes(c)
    return (
        f"// {name}: generated by gemmtune from wgmma_sm90.cuh\n"
        "#define GEMMTUNE_GENERATED 1\n"
        "#include \"wgmma_sm90.cuh\"\n"
        "namespace {\n"
        "struct Config {\n"
        f"  static constexpr int BM = {c['BM']}, BN = {c['BN']}, STAGES = {c['STAGES']}, "
        f"WG = {c['WG']};\n"
        f"  static constexpr bool SWAP = {b(c['SWAP'])}, WS = {b(c['WS'])};\n"
        f"  static constexpr int CLUSTER_M = {c['CLUSTER_M']}, CLUSTER_N = {c['CLUSTER_N']}, "
        f"RASTER = {c['RASTER']}, GROUP = {c['GROUP']};\n"
        f"  static constexpr int EPILOGUE = {c['EPILOGUE']}, C_BUFFERS = {c_buffers(c)}, "
        f"SCHEDULE = {c['SCHEDULE']}, SPLITS = {c['SPLITS']}, CLUSTER_K = {c['CLUSTER_K']};\n"
        f"  static constexpr int OCCUPANCY = {c['OCCUPANCY']}, KSUB = {c['KSUB']};\n"
        f"  static constexpr bool PINGPONG = {b(c['PINGPONG'])}, A_T = {b(c['A_T'])}, "
        f"B_T = {b(c['B_T'])};\n"
        f"  static constexpr int DTYPE = {2 if c['DTYPE'] == 'bf16' else 1};\n"
        f"  static constexpr bool READS_C = {b(c['READS_C'])};\n"
        "};\n"
        "using K = gemmtune::wgmma_sm90::Kernel<Config>;\n"
        f"static_assert(K::SMEM_BYTES == {smem}, \"the family launches with {smem} bytes of shared "
        "memory, the kernel uses K::SMEM_BYTES\");\n"
        "}  // namespace\n"
        "extern \"C\" __global__ void __launch_bounds__(K::THREADS, K::CTAS_PER_SM)\n"
        f"{name}(const __grid_constant__ GemmArgs args) {{\n"
        "  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];\n"
        "  K::run(args, gemmtune_smem);\n"
        "}\n")


# ---- cubins -------------------------------------------------------------------------------------

def sections(path):
    """{name: bytes} of every section of the cubin (tools/sass_census.py reads .text the same way)."""
    elf = pathlib.Path(path).read_bytes()
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    out = {}
    for name, kind, _flags, _addr, offset, size in headers:
        title = elf[names + name:elf.index(b"\0", names + name)].decode()
        out[title] = b"" if kind == 8 else elf[offset:offset + size]  # SHT_NOBITS holds nothing
    return out


def compile_unit(source, templates, cubin):
    """Compiles source (a .cu file) into cubin; returns ptxas's (registers, spill bytes)."""
    cmd = ["nvcc", "-cubin", "-arch=sm_90a", "-std=c++17", "-DNDEBUG", "-Xptxas=-v",
           f"-I{templates}", "-DGEMMTUNE_GENERATED", "-o", str(cubin), str(source)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{run.stdout}{run.stderr}")
    registers = int(re.search(r"Used (\d+) registers", run.stderr).group(1))
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", run.stderr)
    return registers, int(spills.group(1)) + int(spills.group(2))


NVRTC_OPTIONS = ["--gpu-architecture=sm_90a", "-std=c++17", "-minimal", "--ptxas-options=-v",
                 "-DNDEBUG"]  # runtime/src/compiler.cpp, Compiler::options


def nvrtc_library():
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return ctypes.CDLL(os.path.join(home, "lib64", "libnvrtc.so"))


def compile_unit_nvrtc(source, templates, cubin):
    """As compile_unit, through NVRTC as the runtime compiles: every template an in-memory header
    under its name relative to templates/, the runtime's options."""
    lib = nvrtc_library()
    files = sorted(p for p in pathlib.Path(templates).rglob("*") if p.suffix in (".h", ".cuh"))
    names = [str(p.relative_to(templates)).encode() for p in files]
    contents = [p.read_bytes() for p in files]
    program = ctypes.c_void_p()
    n = len(files)

    def check(result, call):
        if result != 0:
            raise RuntimeError(f"{call}: NVRTC error {result}")

    check(lib.nvrtcCreateProgram(ctypes.byref(program), pathlib.Path(source).read_bytes(),
                                 pathlib.Path(source).name.encode(), n,
                                 (ctypes.c_char_p * n)(*contents), (ctypes.c_char_p * n)(*names)),
          "nvrtcCreateProgram")
    try:
        options = [o.encode() for o in NVRTC_OPTIONS]
        result = lib.nvrtcCompileProgram(program, len(options),
                                         (ctypes.c_char_p * len(options))(*options))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
        log = log.value.decode()
        if result != 0:
            raise RuntimeError(f"NVRTC {source}:\n{log}")
        lib.nvrtcGetCUBINSize(program, ctypes.byref(size))
        image = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetCUBIN(program, image), "nvrtcGetCUBIN")
        pathlib.Path(cubin).write_bytes(image.raw)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))
    registers = int(re.search(r"Used (\d+) registers", log).group(1))
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return registers, int(spills.group(1)) + int(spills.group(2))


def checkout(ref, into):
    """templates/ of git revision ref, extracted under into."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "templates"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "templates"


def revision(ref):
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref + "^{commit}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def check_layout(configs, templates, work):
    """layout.h compiled as host C++: its shared memory and C buffers against the formulas above."""
    fields = ["BM", "BN", "STAGES", "WG", "SWAP", "WS", "EPILOGUE", "CLUSTER_K", "KSUB", "PINGPONG"]
    shapes = "".join(
        "  {\n    Shape s{};\n" + "".join(f"    s.{f} = {int(c[f])};\n" for f in fields) +
        "    s.C_BUFFERS = c_buffers(s, SMEM_PER_BLOCK);\n"
        "    std::printf(\"%d %d\\n\", s.C_BUFFERS, smem_bytes(s));\n  }\n" for c in configs)
    program = work / "layout_check.cpp"
    program.write_text("#include <cstdio>\n#include \"wgmma_sm90/layout.h\"\n"
                       "using namespace gemmtune::wgmma_sm90;\n"
                       "// Constant expressions on the host too (the default point: 2 of 4 buffers).\n"
                       "static_assert(c_buffers(Shape{256, 128, 4, 2, false, true, 1, 0, 1, 1, "
                       "false}, SMEM_PER_BLOCK) == 2, \"\");\n"
                       "int main() {\n" + shapes + "}\n")
    binary = work / "layout_check"
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", f"-I{templates}", "-o", str(binary),
                    str(program)], check=True)
    lines = subprocess.run([str(binary)], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    wrong = 0
    for c, line in zip(configs, lines):
        want = f"{c_buffers(c)} {smem_bytes(c)}"
        if line != want:
            wrong += 1
            print(f"layout.h {kernel_name(c)}: C_BUFFERS and bytes {line}, generator {want}")
    return wrong


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="b175d93")
    parser.add_argument("--new", default=str(ROOT / "templates"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work")
    parser.add_argument("--only", default="")
    parser.add_argument("--compiler", choices=["nvcc", "nvrtc"], default="nvcc")
    args = parser.parse_args()

    configs = [c for c in CONFIGS if args.only in kernel_name(c)]
    names = [kernel_name(c) for c in configs]
    assert len(set(names)) == len(names), "two configurations with one name"
    for c in configs:
        check_valid(c)

    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="compare-wgmma-"))
    work.mkdir(parents=True, exist_ok=True)
    old_rev = revision(args.old)
    old_dir = work / f"old-{old_rev[:12]}-{args.compiler}"
    old_templates = old_dir / "templates"
    if not old_templates.exists():
        checkout(old_rev, old_dir)
    if pathlib.Path(args.new).is_dir():
        new_templates = pathlib.Path(args.new).resolve()
    else:
        new_dir = work / "new"
        shutil.rmtree(new_dir, ignore_errors=True)
        new_templates = checkout(revision(args.new), new_dir)
    (work / "units").mkdir(exist_ok=True)
    compile_with = compile_unit if args.compiler == "nvcc" else compile_unit_nvrtc

    def build(c):
        name = kernel_name(c)
        source = work / "units" / f"{name}.cu"
        source.write_text(unit(c))
        old_cubin, new_cubin = old_dir / f"{name}.cubin", work / f"new-{name}.cubin"
        old_report = old_dir / f"{name}.report"
        if old_cubin.exists() and old_report.exists():
            old = tuple(int(x) for x in old_report.read_text().split())
        else:
            old = compile_with(source, old_templates, old_cubin)
            old_report.write_text(f"{old[0]} {old[1]}")
        new = compile_with(source, new_templates, new_cubin)
        a, b = sections(old_cubin), sections(new_cubin)
        text = ".text." + name
        return name, old, new, a[text] == b[text], a == b, len(a[text]) // 16

    failed = 0
    same = 0
    spilled = [0, 0]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, old, new, text_same, all_same, instructions in pool.map(build, configs):
            same += text_same
            spilled[0] += old[1] > 0
            spilled[1] += new[1] > 0
            failed += (not text_same) or new[1] > old[1]
            print(f"{'same' if text_same else 'DIFFERENT':9} {'cubin' if all_same else '-----'} "
                  f"regs {old[0]:3}/{new[0]:3} spills {old[1]}/{new[1]} "
                  f"{instructions:6} instr  {name}", flush=True)
    print(f"{same} of {len(configs)} kernels: .text identical ({args.compiler}; old {args.old}, "
          f"new {args.new})")
    print(f"kernels that spill: {spilled[0]} old, {spilled[1]} new")
    if (new_templates / "wgmma_sm90" / "layout.h").exists():
        wrong = check_layout(configs, new_templates, work)
        print(f"layout.h: {len(configs) - wrong} of {len(configs)} agree with the generator's "
              "shared memory and C buffers")
        failed += wrong
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
