"""The innermost loop of each kernel in a SASS listing, by pipe (NOTES.md row 166).

  cuobjdump -sass build/libqmm.so > k.sass    (or a cubin: nvcc -cubin ... && cuobjdump -sass)
  python3 bench/sass_loop.py k.sass [NAME_PART]

For each kernel (those whose mangled name contains NAME_PART), the shortest backward branch
that contains an HMMA or HGMMA: its instructions, how many of them are tensor ops, and a count
by opcode and by the pipe they issue to on Hopper: the integer pipe (a warp instruction every
two cycles: LOP3, SHF, IADD3, ISETP, FSETP, FMNMX, ...), FMA (IMAD, FFMA, HFMA2, ...), XU
(conversions, transcendentals), tensor, memory, other. The split is by opcode name, a reading of
Nsight Compute's pipe descriptions, not a measurement.
"""
import collections
import re
import sys

PIPES = {
    "int": ("LOP3", "SHF", "IADD3", "ISETP", "LEA", "VIADD", "SEL", "PRMT", "IABS", "IMNMX",
            "VIMNMX", "FLO", "POPC", "BMSK", "PLOP3", "LOP", "FSETP", "FMNMX", "FSEL"),
    "fma": ("IMAD", "FFMA", "FADD", "FMUL", "HFMA2", "HADD2", "HMUL2", "MOV"),
    "xu": ("I2F", "F2I", "F2F", "MUFU", "F2FP"),
    "tensor": ("HMMA", "HGMMA", "IMMA", "WARPGROUP"),
    "memory": ("LDG", "STG", "LDS", "STS", "LDSM", "LDL", "STL", "LDC", "ULDC", "SHFL", "ATOM",
               "RED", "SYNCS", "UBLKCP", "UTMALDG"),
}


def pipe_of(op):
    for pipe, ops in PIPES.items():
        if op in ops:
            return pipe
    return "other"


def kernels(text):
    """(name, [(address, instruction text)]) for each function of the listing."""
    for part in text.split("Function : ")[1:]:
        name = part.split("\n", 1)[0].strip()
        ins = []
        for line in part.split("\n"):
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;", line)
            if m:
                ins.append((int(m.group(1), 16), m.group(2)))
        yield name, ins


def opcode(text):
    words = text.split()
    if words and words[0].startswith("@"):  # a predicate
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def innermost_loop(ins):
    """The shortest [target, branch] range of a backward branch with a tensor op in it."""
    at = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA(?:\.\S+)? (?:\S+, )?0x([0-9a-f]+)", t)
        if not m or int(m.group(1), 16) >= a or int(m.group(1), 16) not in at:
            continue
        body = ins[at[int(m.group(1), 16)]:i + 1]
        tensor = any(pipe_of(opcode(x)) == "tensor" for _, x in body)
        if tensor and (best is None or len(body) < len(best)):
            best = body
    return best


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    for name, ins in kernels(open(sys.argv[1]).read()):
        if want not in name:
            continue
        body = innermost_loop(ins)
        if not body:
            continue
        ops = collections.Counter(opcode(t) for _, t in body)
        pipes = collections.Counter()
        for op, n in ops.items():
            pipes[pipe_of(op)] += n
        tensor = sum(n for op, n in ops.items() if op in ("HMMA", "HGMMA", "IMMA"))
        print("%s\n  loop: %d instructions, %d tensor ops; by pipe: %s" % (
            name, len(body), tensor, ", ".join("%s %d" % kv for kv in pipes.most_common())))
        print("  by opcode: " + ", ".join("%s %d" % kv for kv in ops.most_common()))


if __name__ == "__main__":
    main()
