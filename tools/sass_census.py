#!/usr/bin/env python3
"""Counts the SASS instructions that matter for the tensor-core families in cubins, without
cuobjdump (which Debian's main archive does not ship). Reads the opcode field (bits 0-11 of
each 128-bit instruction) of every kernel's .text section; the opcodes were calibrated on
kernels of one instruction each, compiled with nvcc 13.0 for sm_80, sm_86, sm_89 and sm_90 (the
same there): HMMA 0x23c (bit 11 of the high word: k16, bit 18: bf16), LDSM 0x83b, LDGSTS 0xfae,
LDGDEPBAR 0x9af, DEPBAR 0x91a, BAR 0xb1d, LDS 0x984, STS 0x388, LDL 0x983, STL 0x387.
cuobjdump --dump-sass says the same with names, where it is installed.

  tools/sass_census.py FILE...         cubins, or kernel-cache entries (~/.cache/gemmtune/kernels)
  tools/sass_census.py --check FILE... exit 1 unless every kernel has HMMA.16816 and LDSM and no
                                       local memory (LDL/STL)
"""
import struct
import sys

OPCODES = {0x23C: "HMMA", 0x83B: "LDSM", 0xFAE: "LDGSTS", 0x9AF: "LDGDEPBAR", 0x91A: "DEPBAR",
           0xB1D: "BAR", 0x984: "LDS", 0x388: "STS", 0x983: "LDL", 0x387: "STL"}
COLUMNS = ["HMMA.16816.F32.BF16", "HMMA.16816.F32.F16", "LDSM", "LDGSTS", "LDS", "STS", "BAR", "LDL", "STL"]


def kernels(data):
    """(name, code) of every .text section of the ELF image that starts somewhere in data."""
    start = data.find(b"\x7fELF")
    if start < 0:
        return []
    elf = data[start:]
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    out = []
    for name, _type, _flags, _addr, offset, size in sections:
        title = elf[names + name:elf.index(b"\0", names + name)].decode()
        if title.startswith(".text."):
            out.append((title[len(".text."):], elf[offset:offset + size]))
    return out


def census(code):
    counts = dict.fromkeys(COLUMNS, 0)
    counts["instructions"] = len(code) // 16
    for i in range(0, len(code) - 15, 16):
        lo, hi = struct.unpack_from("<QQ", code, i)
        name = OPCODES.get(lo & 0xFFF)
        if name == "HMMA":
            if hi & 0x800:  # m16n8k16; otherwise m16n8k8
                counts["HMMA.16816.F32.BF16" if hi & 0x40000 else "HMMA.16816.F32.F16"] += 1
        elif name in counts:
            counts[name] += 1
    return counts


def main(argv):
    check = "--check" in argv
    files = [a for a in argv if a != "--check"]
    failed = False
    print("kernel".ljust(52), "instr", *(c.rjust(len(c)) for c in COLUMNS))
    for path in files:
        with open(path, "rb") as f:
            found = kernels(f.read())
        if not found:
            print(f"{path}: no cubin", file=sys.stderr)
            failed = True
        for name, code in found:
            c = census(code)
            print(name[:52].ljust(52), str(c["instructions"]).rjust(5), *(str(c[k]).rjust(len(k)) for k in COLUMNS))
            hmma = c["HMMA.16816.F32.BF16"] + c["HMMA.16816.F32.F16"]
            if check and (hmma == 0 or c["LDSM"] == 0 or c["LDL"] or c["STL"]):
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
