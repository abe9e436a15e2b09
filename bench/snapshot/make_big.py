"""Makes a large memory snapshot for benchmarking `oomkit snapshot` by scaling a
real file's trace: the segments, annotations and settings are kept, and the
trace of device 0 is repeated until the file reaches the target size. Every
event is a fresh dict whose keys, action strings and `frames` list are fetched
from the pickle memo, as in real files. The copies repeat the same addresses
(each copy is the same bytes, which keeps the generator fast), so the replayed
figures of the big file mean nothing; only the decoding work is realistic.

Only the standard library: the input is read with a restricted unpickler (no
globals), and the output is written opcode by opcode in protocol 4 (what
`torch.cuda.memory._dump_snapshot` writes on Python <= 3.13), streamed, so the
generator needs little memory whatever the size.

Usage: python3 make_big.py INPUT.pickle OUTPUT.pickle [SIZE_MB=1024]
"""
import io
import pickle
import struct
import sys


class Restricted(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")


class Writer:
    """A minimal protocol-4 pickler with a memo keyed by object identity."""

    def __init__(self, f):
        self.f = f
        self.memo = {}
        self.keep = []  # keep memoized objects alive so ids stay unique

    def memoize(self, obj):
        self.memo[id(obj)] = len(self.memo)
        self.keep.append(obj)
        self.f.write(b"\x94")  # MEMOIZE

    def fresh_memo(self):
        # A fresh container that is memoized but never fetched (like pickle does).
        self.memo[("fresh", len(self.memo))] = len(self.memo)
        self.f.write(b"\x94")

    def get(self, obj):
        i = self.memo.get(id(obj))
        if i is None:
            return False
        self.f.write(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))
        return True

    def save(self, obj):
        w = self.f.write
        if obj is None:
            w(b"N")
        elif obj is True:
            w(b"\x88")
        elif obj is False:
            w(b"\x89")
        elif isinstance(obj, int):
            self.int(obj)
        elif isinstance(obj, float):
            w(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, str):
            if self.get(obj):
                return
            b = obj.encode("utf-8", "surrogatepass")
            w((b"\x8c" + bytes([len(b)])) if len(b) < 256 else (b"X" + struct.pack("<I", len(b))))
            w(b)
            self.memoize(obj)
        elif isinstance(obj, (list, tuple)):
            if self.get(obj):
                return
            if isinstance(obj, tuple):
                w(b"(")
                for x in obj:
                    self.save(x)
                w(b"t")
                self.memoize(obj)
                return
            w(b"]")
            self.memoize(obj)
            for k in range(0, len(obj), 1000):
                w(b"(")
                for x in obj[k : k + 1000]:
                    self.save(x)
                w(b"e")
        elif isinstance(obj, dict):
            if self.get(obj):
                return
            w(b"}")
            self.memoize(obj)
            self.items(list(obj.items()))
        else:
            raise TypeError(type(obj))

    def items(self, items):
        for k in range(0, len(items), 1000):
            self.f.write(b"(")
            for key, v in items[k : k + 1000]:
                self.save(key)
                self.save(v)
            self.f.write(b"u")

    def int(self, v):
        w = self.f.write
        if 0 <= v < 256:
            w(b"K" + bytes([v]))
        elif 0 <= v < 65536:
            w(b"M" + struct.pack("<H", v))
        elif -(2**31) <= v < 2**31:
            w(b"J" + struct.pack("<i", v))
        else:
            n = (v.bit_length() + 8) // 8
            w(b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True))


def main():
    src, dst = sys.argv[1], sys.argv[2]
    target = int(sys.argv[3]) * 2**20 if len(sys.argv) > 3 else 2**30
    with open(src, "rb") as f:
        snap = Restricted(f).load()
    trace = snap["device_traces"][0]
    with open(dst, "wb", buffering=1 << 22) as f:
        w = Writer(f)
        f.write(b"\x80\x04}")
        w.fresh_memo()
        f.write(b"(")
        for key, value in snap.items():
            if key == "device_traces":
                continue
            w.save(key)
            w.save(value)
        # device_traces: [[events of copy 0, copy 1, ...], *other devices]
        w.save("device_traces")
        f.write(b"]")
        w.fresh_memo()
        f.write(b"(]")
        w.fresh_memo()
        # Copy 0 memoizes every key, string and frames list; every later copy
        # is then the same bytes (fresh dicts, memo fetches, integers), so it is
        # written once to a template and repeated.
        def write_copy(out):
            w.f = out
            for k in range(0, len(trace), 1000):
                out.write(b"(")
                for e in trace[k : k + 1000]:
                    out.write(b"}")
                    w.fresh_memo()
                    out.write(b"(")
                    for key, v in e.items():
                        w.save(key)
                        w.save(v)
                    out.write(b"u")
                out.write(b"e")

        write_copy(f)
        template = io.BytesIO()
        write_copy(template)
        template = template.getvalue()
        w.f = f
        copies = 2
        f.write(template)
        while f.tell() < target:
            f.write(template)
            copies += 1
        for other in snap["device_traces"][1:]:
            w.save(other)
        f.write(b"eu.")  # close device_traces (APPENDS) and the top dict (SETITEMS)
        size = f.tell()
    print(f"{dst}: {size / 2**20:.0f} MiB, {copies} copies of {len(trace)} events = {copies * len(trace)} events")


if __name__ == "__main__":
    main()
