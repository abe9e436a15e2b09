# ---- oomkit leaks (crates/oomkit_leaks/src/leaks_hook.py) ----
#
# Prepended to oomkit's sitecustomize (crates/oomkit_probe/src/hook/), whose
# torch finder calls _oomkit_extra_on_torch(torch) in the main process right
# after `import torch`. With OOMKIT_LEAKS_FILE set it:
#   - tags every tensor storage the program creates with the first frame in
#     the user's code (a TorchDispatchMode from torch.utils._python_dispatch
#     sees every op's outputs), counting bytes once per storage (id of the
#     storage object, which PyTorch preserves while the storage lives; a
#     weakref callback forgets it when the storage dies);
#   - counts steps: optimizer steps (register_optimizer_step_post_hook), batches
#     drawn from a DataLoader iterator, Keras train_step/test_step, or the
#     function named by OOMKIT_LEAKS_MARKER (module:function);
#   - at each step boundary appends to OOMKIT_LEAKS_FILE (JSON lines) the bytes
#     still alive per creation site that were created in earlier steps;
#   - at boundary OOMKIT_LEAKS_STEPS looks for what holds the surviving tensors
#     of the sites that grew (a walk from the names in the user's frames and
#     modules through containers, attributes, closures and autograd graphs),
#     writes it, flushes stdout/stderr and ends the process with os._exit(0):
#     no code of the program runs after the last step.
# It never initialises CUDA, never prints, never raises into the program (an
# error of its own is written to the file and the hook turns itself off), and
# bounds what it keeps (_OOMKIT_MAX_SITES creation sites, walk limits).

_OOMKIT_MAX_SITES = 4096
_OOMKIT_MAX_CANDIDATES = 16
_OOMKIT_WALK_NODES = 200000
_OOMKIT_WALK_ITEMS = 10000
_OOMKIT_WALK_DEPTH = 8
_OOMKIT_GRAPH_NODES = 200000
_OOMKIT_WALK_SECONDS = 20.0
_OOMKIT_PRIORITY = {"dataloader": 1, "keras": 1, "optimizer": 2, "marker": 3}


class _OomkitLeaks:
    def __init__(self, torch, path, steps, marker):
        self.torch = torch
        self._start(torch, path, steps, marker,
                    {"torch": str(getattr(torch, "__version__", "?"))})

    def _start(self, lib, path, steps, marker, header):
        """The state both grains share; opens the record and writes its
        header (`header` adds the framework's own keys)."""
        import sys
        import os

        self.path = path
        self.steps = steps
        self.marker = marker
        self.pid = os.getpid()
        self.records = {}
        self.sites = []
        self.site_index = {}
        self.site_written = 0
        self.user_cache = {}
        self.step = 0
        self.boundary_count = 0
        self.source = None
        self.history = []
        self.graph_history = []
        self.young_history = []
        self.flags = 0
        self.off = False
        self.pending_marker = False
        self.module_files = {}
        self.busy = False
        self.done = False
        self.graph_calls = []
        self.exclude = self._excluded_prefixes(lib)
        self.out = open(path, "a", encoding="utf-8")
        self._write({"hook": 1, "pid": self.pid, "steps": steps, "marker": marker,
                     "python": sys.version.split()[0], **header})

    # -- plumbing -------------------------------------------------------
    def _write(self, obj):
        import json
        import os

        if os.getpid() != self.pid:
            return
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.out.flush()

    def fail(self, where):
        import traceback

        self.off = True
        try:
            self._write({"error": where, "detail": traceback.format_exc(limit=4)[-2000:]})
        except Exception:
            pass

    def _excluded_prefixes(self, torch):
        import os
        import site
        import sysconfig

        dirs = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            p = sysconfig.get_paths().get(key)
            if p:
                dirs.add(p)
        try:
            dirs.update(site.getsitepackages())
        except Exception:
            pass
        try:
            dirs.add(site.getusersitepackages())
        except Exception:
            pass
        for mod in (torch, os):
            f = getattr(mod, "__file__", None)
            if f:
                dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(f))) if mod is os
                         else os.path.dirname(os.path.abspath(f)))
        dirs.add(os.path.dirname(os.path.abspath(__file__)))
        out = []
        for d in dirs:
            d = os.path.abspath(d)
            out.append(d.rstrip(os.sep) + os.sep)
        return tuple(out)

    def is_user(self, code):
        name = code.co_filename
        hit = self.user_cache.get(name)
        if hit is None:
            import os

            if name in ("<string>", "<stdin>"):
                hit = True
            elif name.startswith("<"):
                hit = False
            else:
                hit = not os.path.abspath(name).startswith(self.exclude)
            self.user_cache[name] = hit
        return hit

    def user_frame(self, depth):
        import sys

        try:
            f = sys._getframe(depth)
        except ValueError:
            return None
        while f is not None:
            if self.is_user(f.f_code):
                return f
            f = f.f_back
        return None

    def site_of(self, frame):
        if frame is None:
            key = ("", 0, "")
        else:
            code = frame.f_code
            key = (code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name))
        idx = self.site_index.get(key)
        if idx is None:
            if len(self.sites) >= _OOMKIT_MAX_SITES:
                key = ("", -1, "")
                idx = self.site_index.get(key)
                if idx is not None:
                    return idx
            idx = len(self.sites)
            self.sites.append(key)
            self.site_index[key] = idx
        return idx

    # -- creation sites ---------------------------------------------------
    def tag(self, out):
        if self.off or self.busy:
            return
        if self.pending_marker:
            self.pending_marker = False
            self.boundary("marker")
            if self.off or self.done:
                return
        t = self.torch.Tensor
        if isinstance(out, t):
            self.tag_one(out)
        elif isinstance(out, (tuple, list)):
            for o in out:
                if isinstance(o, t):
                    self.tag_one(o)

    def tag_one(self, tensor):
        import weakref

        try:
            storage = tensor.untyped_storage()
        except Exception:
            return
        key = id(storage)
        if key in self.records:
            return
        try:
            n = int(storage.nbytes())
            device = storage.device.type
        except Exception:
            return
        if n <= 0 or device == "meta":
            return
        site = self.site_of(self.user_frame(3))
        records = self.records

        def forget(_ref, key=key, records=records):
            records.pop(key, None)

        records[key] = [site, self.step, n, self.flags, weakref.ref(storage, forget), device]

    # -- step boundaries --------------------------------------------------
    def clock(self, source):
        """None when a boundary from `source` does not count (off, done, inside
        one already, not the marker when there is one, or a lower-priority
        clock than the one in use); else whether `source` is a better clock
        than the one so far (everything before it was setup)."""
        if self.off or self.done or self.busy:
            return None
        if self.marker and source != "marker":
            return None
        rank = _OOMKIT_PRIORITY.get(source, 0)
        current = _OOMKIT_PRIORITY.get(self.source, 0)
        if rank < current:
            return None
        return rank > current

    def boundary(self, source):
        better = self.clock(source)
        if better is None:
            return
        self.busy = True
        try:
            if better:
                # A better clock: everything so far is setup (step 0).
                self.source = source
                self.boundary_count = 0
                self.history = []
                self.graph_history = []
                self.young_history = []
                for rec in self.records.values():
                    rec[1] = 0
            self.boundary_count += 1
            b = self.boundary_count
            alive = {}
            young = {}
            total = 0
            for rec in list(self.records.values()):
                total += rec[2]
                if rec[1] < b - 1:
                    alive[rec[0]] = alive.get(rec[0], 0) + rec[2]
                else:
                    young[rec[0]] = young.get(rec[0], 0) + rec[2]
            self.step = b
            self._write_sites()
            self.history.append(alive)
            self.young_history.append(young)
            line = {"boundary": b, "source": source, "alive": {str(k): v for k, v in alive.items()},
                    "young": {str(k): v for k, v in young.items()},
                    "tracked_bytes": total, "graphs": self.census()}
            cuda = getattr(self.torch, "cuda", None)
            try:
                if cuda is not None and cuda.is_initialized():
                    line["cuda_allocated"] = int(cuda.memory_allocated())
            except Exception:
                pass
            self._write(line)
        except Exception:
            self.fail("boundary")
            return
        finally:
            self.busy = False
        if b >= self.steps:
            self.finish(final=True)

    def census(self):
        """Autograd nodes reachable from each named holder (a kept graph can
        hold many nodes and few tensor bytes: after backward() its saved
        tensors are freed, its nodes are not)."""
        walk = _OomkitWalk(self, {}, depth=4, nodes=50000, seconds=2.0)
        walk.run(self.roots(True))
        out = {}
        for h in walk.holders:
            if h["nodes"] > 0:
                text = h["text"]
                o = h["origin"]
                out["%s|%s|%s|%s" % (o[0], o[1], o[3], text)] = h["nodes"]
        self.graph_history.append(out)
        return out

    def _write_sites(self):
        while self.site_written < len(self.sites):
            f, line, fn = self.sites[self.site_written]
            self._write({"site": self.site_written, "file": f, "line": line, "function": fn})
            self.site_written += 1

    # -- the end: who holds what grew -------------------------------------
    def finish(self, final):
        import sys
        import os

        if self.done:
            return
        self.done = True
        self.busy = True
        try:
            self.analyse(final)
        except Exception:
            self.fail("analysis")
        try:
            self._write({"end": self.boundary_count, "reason": "steps" if final else "exit"})
            self.out.close()
        except Exception:
            pass
        if final:
            for s in (sys.stdout, sys.stderr):
                try:
                    s.flush()
                except Exception:
                    pass
            os._exit(0)

    def candidates(self):
        h = self.history
        if len(h) < 3:
            return []
        mid = h[len(h) // 2]
        last = h[-1]
        grew = [(last.get(s, 0) - mid.get(s, 0), s) for s in last if last.get(s, 0) > mid.get(s, 0)]
        grew.sort(reverse=True)
        out = [s for _, s in grew[:_OOMKIT_MAX_CANDIDATES]]
        self.young_candidates = set()
        # A tensor replaced every step by a bigger one (torch.cat onto itself):
        # nothing survives a step, but what this step made keeps growing.
        y = self.young_history[-4:]
        if len(y) == 4:
            for s in y[-1]:
                if s not in out and all(y[i].get(s, 0) < y[i + 1].get(s, 0) for i in range(3)):
                    out.append(s)
                    self.young_candidates.add(s)
        return out

    def graph_candidates(self):
        h = self.graph_history
        if len(h) < 3:
            return set()
        mid, last = h[len(h) // 2], h[-1]
        return {k for k, n in last.items() if n > mid.get(k, 0)}

    def analyse(self, final):
        cands = self.candidates()
        graphs = self.graph_candidates()
        if not cands and not graphs:
            return
        b = self.boundary_count
        wanted = set(cands)
        targets = {}
        young = getattr(self, "young_candidates", set())
        for key, rec in self.records.items():
            # What survived a step; this step's own only for a site that
            # grows by replacing one tensor with a bigger one.
            if rec[0] in wanted and (rec[1] < b - 1 or rec[0] in young):
                targets[key] = rec
        walk = _OomkitWalk(self, targets)
        walk.run(self.roots(final))
        for site in cands:
            self._write(walk.site_report(site))
        for hid, h in enumerate(walk.holders):
            o = h["origin"]
            key = "%s|%s|%s|%s" % (o[0], o[1], o[3], h["text"])
            if key in graphs:
                self._write({"graph_holder": key, "holder": walk.holder_report(hid, "graph", 0)})

    def roots(self, final):
        import sys

        roots = []
        seen_frames = set()
        if final:
            f = sys._getframe(0)
            while f is not None:
                # A module's own frame: its names are its globals, found below.
                if (self.is_user(f.f_code) and id(f) not in seen_frames and f.f_code.co_flags & 1
                        and f is not getattr(self, "skip_frame", None)):
                    seen_frames.add(id(f))
                    code = f.f_code
                    where = (code.co_filename, code.co_firstlineno, getattr(code, "co_qualname", code.co_name))
                    items = _oomkit_frame_locals(f)
                    for name, value in items:
                        roots.append((("local",) + where, name, value))
                f = f.f_back
        for mod in list(sys.modules.values()):
            fname = getattr(mod, "__file__", None)
            mname = getattr(mod, "__name__", None)
            # At exit a module may have lost its __file__: the one seen before.
            if fname is None and mname is not None:
                fname = self.module_files.get(mname)
            elif fname is not None and mname is not None:
                self.module_files[mname] = fname
            if mod is None or (fname is None and getattr(mod, "__name__", "") != "__main__"):
                continue
            if fname is not None and not self.is_user(_OomkitFile(fname)):
                continue
            if getattr(mod, "__name__", "") == "sitecustomize":
                continue
            try:
                items = list(vars(mod).items())
            except Exception:
                continue
            where = (fname or "<string>", 0, getattr(mod, "__name__", "?"))
            for name, value in items:
                if name.startswith("__") and name.endswith("__"):
                    continue
                roots.append((("global",) + where, name, value))
        return roots


def _oomkit_frame_locals(f):
    """A function frame's variables. Before Python 3.13 `frame.f_locals` is a
    snapshot dict kept on the frame, which would keep this step's tensors
    alive until the next look; it is emptied again (the next f_locals or
    trace call rebuilds it from the frame's own variables first, so nothing
    the program sees changes). A module's or class body's f_locals is its
    namespace and is left alone."""
    import sys

    try:
        d = f.f_locals
        items = list(d.items())
    except Exception:
        return []
    if sys.version_info < (3, 13) and f.f_code.co_flags & 1 and d is not f.f_globals:
        try:
            d.clear()
        except Exception:
            pass
    return items


class _OomkitFile:
    __slots__ = ("co_filename",)

    def __init__(self, name):
        self.co_filename = name


def _oomkit_children(leaks, obj, path, framework_types, module_type):
    """What the holder walks follow from `obj`, as (child, path) pairs:
    container items (at most _OOMKIT_WALK_ITEMS each), a user function's
    closure cells and defaults, a bound method's object and function, and the
    attributes of objects of user classes (their class attributes too) or of
    `framework_types` (torch's modules and optimizers), a `module_type`'s
    parameters, buffers and submodules named as its attributes."""
    import collections
    import types

    if isinstance(obj, dict):
        for i, (k, v) in enumerate(obj.items()):
            if i >= _OOMKIT_WALK_ITEMS:
                break
            yield v, path + (("key", k),)
    elif isinstance(obj, (list, tuple, collections.deque)):
        for i, v in enumerate(obj):
            if i >= _OOMKIT_WALK_ITEMS:
                break
            yield v, path + (("item", i),)
    elif isinstance(obj, (set, frozenset)):
        for i, v in enumerate(obj):
            if i >= _OOMKIT_WALK_ITEMS:
                break
            yield v, path + (("item", None),)
    elif isinstance(obj, types.FunctionType):
        if not leaks.is_user(obj.__code__):
            return
        for cname, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
            try:
                yield cell.cell_contents, path + (("closure", cname),)
            except ValueError:
                pass
        # Mutable defaults (`def track(loss, history=[])`): created once and
        # kept by the function. The segment carries the parameter's name and
        # the function's place, where the store line is looked for.
        code = obj.__code__
        defaults = obj.__defaults__ or ()
        first = code.co_argcount - len(defaults)
        for i, v in enumerate(defaults):
            pname = code.co_varnames[first + i] if 0 <= first + i < len(code.co_varnames) else None
            yield v, path + (("default", (pname, code.co_filename, code.co_firstlineno, i)),)
        for k, v in (obj.__kwdefaults__ or {}).items():
            yield v, path + (("default", (k, code.co_filename, code.co_firstlineno, k)),)
    elif isinstance(obj, types.MethodType):
        yield obj.__self__, path
        yield obj.__func__, path
    else:
        cls = type(obj)
        user = leaks.is_user(_OomkitFile(getattr(
            __import__("sys").modules.get(cls.__module__), "__file__", None) or "<x>"))
        if not (user or isinstance(obj, framework_types)):
            return
        if user:
            # Class attributes (`buffer = []` in the class body), named
            # through the instance.
            try:
                for k, v in vars(cls).items():
                    if not k.startswith("__") and not callable(v) and not isinstance(v, (property, staticmethod, classmethod)):
                        yield v, path + (("attr", k),)
            except Exception:
                pass
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return
        for i, (k, v) in enumerate(attrs.items()):
            if i >= _OOMKIT_WALK_ITEMS:
                break
            if isinstance(obj, module_type) and k in ("_parameters", "_buffers", "_modules") and isinstance(v, dict):
                for k2, v2 in v.items():
                    yield v2, path + (("attr", k2),)
                continue
            yield v, path + (("attr", k),)


class _OomkitWalk:
    """Breadth-first from named roots to the tensors whose storages (or whose
    autograd graphs' saved tensors) are the targets; the first path to reach
    a storage names its holder."""

    def __init__(self, leaks, targets, depth=_OOMKIT_WALK_DEPTH, nodes=_OOMKIT_WALK_NODES,
                 seconds=_OOMKIT_WALK_SECONDS):
        self.depth = depth
        self.max_nodes = nodes
        self.seconds = seconds
        self.leaks = leaks
        self.torch = leaks.torch
        self.targets = targets
        self.owner = {}
        self.holders = []
        self.holder_ids = {}
        self.seen = set()
        self.seen_nodes = set()

    def run(self, roots):
        import collections
        import time
        import types

        torch = self.torch
        Tensor = torch.Tensor
        nn = getattr(torch, "nn", None)
        Module = getattr(nn, "Module", ()) if nn is not None else ()
        optim = getattr(torch, "optim", None)
        Optimizer = getattr(optim, "Optimizer", ()) if optim is not None else ()
        skip_types = (type, types.ModuleType, str, bytes, int, float, bool, type(None), complex)
        q = collections.deque()
        for origin, name, value in roots:
            q.append((value, (name,), origin, 0))
        deadline = time.monotonic() + self.seconds
        visited = 0
        while q:
            obj, path, origin, depth = q.popleft()
            if isinstance(obj, skip_types):
                continue
            oid = id(obj)
            if oid in self.seen:
                continue
            self.seen.add(oid)
            visited += 1
            if visited > self.max_nodes or (visited & 1023) == 0 and time.monotonic() > deadline:
                break
            if isinstance(obj, Tensor):
                self.tensor(obj, path, origin)
                continue
            if type(obj).__name__ == "ndarray":
                # t.numpy() shares the tensor's storage; the array's base is the tensor.
                base = getattr(obj, "base", None)
                while base is not None and type(base).__name__ == "ndarray":
                    base = getattr(base, "base", None)
                if isinstance(base, Tensor):
                    self.tensor(base, path, origin)
                continue
            if depth >= self.depth:
                continue
            d = depth + 1
            try:
                for child, child_path in _oomkit_children(self.leaks, obj, path, (Module, Optimizer), Module):
                    q.append((child, child_path, origin, d))
            except Exception:
                continue

    def _claim(self, key, holder, via):
        if key in self.targets and key not in self.owner:
            self.owner[key] = (holder, via)

    def tensor(self, t, path, origin):
        torch = self.torch
        text = _oomkit_path_text(path)[0]
        try:
            grad = t.grad if isinstance(t, torch.nn.Parameter) else None
            if grad is not None and grad.grad_fn is not None:
                # backward(create_graph=True) left graphs in the .grad of every
                # parameter: one holder, the object that owns them.
                text = "%s (the .grad of its parameters)" % path[0]
        except Exception:
            pass
        hkey = (text, origin)
        hid = self.holder_ids.get(hkey)
        if hid is None:
            hid = len(self.holders)
            self.holder_ids[hkey] = hid
            self.holders.append({"path": path, "text": text, "origin": origin, "nodes": 0, "saved_bytes": 0,
                                 "tensors": 0, "grad_fn": False, "param": False,
                                 "requires_grad": False, "numel": 0})
        holder = self.holders[hid]
        holder["tensors"] += 1
        try:
            holder["grad_fn"] |= t.grad_fn is not None
            holder["requires_grad"] |= bool(t.requires_grad)
            holder["param"] |= isinstance(t, torch.nn.Parameter)
            holder["numel"] = max(holder["numel"], int(t.numel()))
        except Exception:
            pass
        try:
            self._claim(id(t.untyped_storage()), hid, "held")
        except Exception:
            pass
        grad = getattr(t, "grad", None) if isinstance(t, torch.nn.Parameter) else None
        if grad is not None:
            try:
                self._claim(id(grad.untyped_storage()), hid, "held")
            except Exception:
                pass
            gfn = getattr(grad, "grad_fn", None)
            if gfn is not None:
                holder["grad_graph"] = True
                self.graph(gfn, hid, holder)
        fn = getattr(t, "grad_fn", None)
        if fn is not None:
            self.graph(fn, hid, holder)

    def graph(self, fn, hid, holder):
        stack = [fn]
        Tensor = self.torch.Tensor
        while stack:
            node = stack.pop()
            if node is None:
                continue
            nid = id(node)
            if nid in self.seen_nodes or len(self.seen_nodes) >= _OOMKIT_GRAPH_NODES:
                continue
            self.seen_nodes.add(nid)
            holder["nodes"] += 1
            try:
                names = [a for a in dir(node) if a.startswith("_saved_")]
            except Exception:
                names = []
            for a in names:
                try:
                    v = getattr(node, a)
                except Exception:
                    continue
                vals = v if isinstance(v, (tuple, list)) else (v,)
                for x in vals:
                    if isinstance(x, Tensor):
                        try:
                            s = x.untyped_storage()
                            holder["saved_bytes"] += int(s.nbytes())
                            self._claim(id(s), hid, "graph")
                        except Exception:
                            pass
            try:
                # AccumulateGrad: the leaf, and the .grad backward() gave it.
                var = getattr(node, "variable", None)
                if isinstance(var, Tensor):
                    self._claim(id(var.untyped_storage()), hid, "graph")
                    # A parameter's .grad belongs to the parameter's holder.
                    g = None if isinstance(var, self.torch.nn.Parameter) else var.grad
                    if g is not None:
                        self._claim(id(g.untyped_storage()), hid, "graph")
            except Exception:
                pass
            try:
                for nxt, _ in node.next_functions:
                    stack.append(nxt)
            except Exception:
                pass

    def site_report(self, site):
        per_holder = {}
        unheld = 0
        flags = 0
        devices = set()
        total = 0
        for key, rec in self.targets.items():
            if rec[0] != site:
                continue
            total += rec[2]
            flags |= rec[3]
            devices.add(rec[5])
            o = self.owner.get(key)
            if o is None:
                unheld += rec[2]
            else:
                k = (o[0], o[1])
                per_holder[k] = per_holder.get(k, 0) + rec[2]
        out = {"candidate": site, "bytes": total, "unheld_bytes": unheld,
               "create_graph": bool(flags & 1), "loader": bool(flags & 2),
               "devices": sorted(devices)}
        if per_holder:
            (hid, via), held = max(per_holder.items(), key=lambda kv: kv[1])
            out["holder"] = self.holder_report(hid, via, held)
        return out

    def holder_report(self, hid, via, held):
        h = self.holders[hid]
        _, name, attr = _oomkit_path_text(h["path"])
        text = h["text"]
        origin = h["origin"]
        store = None if h.get("grad_graph") else _oomkit_store_line(self.leaks, origin, name, attr, h["path"])
        return {
            "text": text, "scope": origin[0], "file": origin[1], "function": origin[3],
            "key": "%s|%s|%s|%s" % (origin[0], origin[1], origin[3], text),
            "via": via, "bytes": held, "graph_nodes": h["nodes"], "saved_bytes": h["saved_bytes"],
            "grad_fn": h["grad_fn"], "requires_grad": h["requires_grad"],
            "tensors": h["tensors"], "numel": h["numel"], "param": h["param"],
            "grad_graph": bool(h.get("grad_graph")),
            "optimizer": _oomkit_optimizer_path(self.torch, h["path"]),
            "store": store,
        }


def _oomkit_optimizer_path(torch, path):
    return any(isinstance(seg, tuple) and seg[0] == "attr" and seg[1] in ("state", "param_groups")
               for seg in path)


def _oomkit_path_text(path):
    """`losses`, `self.history`, `stats["loss"]`, `store` (a closure's), and
    the name and attribute the store line is looked for with."""
    text = path[0]
    name = path[0]
    attr = None
    last_named = text
    for seg in path[1:]:
        kind, v = seg
        if text.endswith("[…]"):
            # Items of one container are one holder: `history`, not
            # `history[…]["loss"]` and `history[…]["logits"]`.
            break
        if kind == "attr" and isinstance(v, str) and v.isdigit():
            text += "[%s]" % v
            last_named = text
        elif kind == "attr":
            text += "." + str(v)
            attr = str(v)
            name = str(v)
            last_named = text
        elif kind == "closure":
            text = str(v)
            name = str(v)
            attr = None
            last_named = text
        elif kind == "default":
            pname, _, _, at = v if isinstance(v, tuple) and len(v) == 4 else (None, None, None, None)
            if isinstance(at, int):
                text += ".__defaults__[%d]" % at
            elif isinstance(at, str):
                text += '.__kwdefaults__["%s"]' % at
            else:
                text += ".__defaults__"
            if isinstance(pname, str):
                # Stored through the parameter's name, in the function.
                name = pname
                attr = None
            last_named = text
        elif kind == "key" and isinstance(v, str) and len(v) <= 40:
            text += '["%s"]' % v
            last_named = text
        else:
            text += "[…]"
    return last_named, name, attr


def _oomkit_store_line(leaks, origin, name, attr, path):
    """The line that stores into the holder: a mutation of the name
    (`.append(`, `[…] =`, `+=`, `.add_(` …) in the function of the frame that
    names it, else in its file; else an assignment that reads the name too."""
    import linecache
    import re

    if not isinstance(name, str) or not name.isidentifier():
        return None
    prefix = r"\." if attr else r"(?<![\w.])"
    mutate = re.compile(prefix + re.escape(name) +
                        r"\s*(?:\[[^\]]*\]\s*)*(?:\.(?:append|extend|insert|appendleft|add|update|setdefault|add_|copy_|put|push|__setitem__|add_param_group|register_buffer|register_parameter|add_module)\s*\(|\[[^\]]*\]\s*=(?!=)|[-+*/|]=)")
    assign = re.compile(prefix + re.escape(name) + r"\s*=(?!=)\s*(.*)$")
    scopes = []
    scope, fname, first, _func = origin[0], origin[1], origin[2], origin[3]
    if fname and not fname.startswith("<"):
        if scope == "local" and first:
            scopes.append((fname, first))
        scopes.append((fname, None))
    for seg in path or ():
        # A function's default is stored into in that function's body.
        if isinstance(seg, tuple) and seg[0] == "default" and isinstance(seg[1], tuple) \
                and len(seg[1]) == 4 and seg[1][0] == name and isinstance(seg[1][1], str):
            scopes.insert(0, (seg[1][1], seg[1][2]))
    for f in list(leaks.user_cache):
        if leaks.user_cache.get(f) and f != fname and not f.startswith("<"):
            scopes.append((f, None))
    best = None
    for fi, (f, start) in enumerate(scopes):
        lines = linecache.getlines(f)
        if not lines:
            continue
        lo, hi = 1, len(lines)
        if start:
            lo = start
            hi = _oomkit_function_end(lines, start)
        hits = []
        quoted = _oomkit_quoted_lines(lines)
        for no in range(lo, hi + 1):
            if no in quoted:
                continue
            src = lines[no - 1].split("#", 1)[0]
            if mutate.search(src):
                hits.append((0, no, src.strip()))
            else:
                m = assign.search(src)
                if m:
                    rhs = m.group(1).strip()
                    if re.search(r"(?<![\w.])" + re.escape(name) + r"\b", rhs) or (attr and re.search(r"\." + re.escape(name) + r"\b", rhs)):
                        hits.append((1, no, src.strip()))
                    elif rhs and not re.match(r"^(\[\]|\{\}|\(\)|None|0|0\.0|list\(\)|dict\(\)|set\(\)|\[\s*\]|deque\(.*\)|collections\.deque\(.*\)|defaultdict\(.*\))$", rhs):
                        hits.append((2, no, src.strip()))
        if hits:
            hits.sort()
            rank, no, src = hits[0]
            cand = (rank, fi, {"file": f, "line": no, "code": src[:200], "rank": rank})
            if best is None or cand[:2] < best[:2]:
                best = cand
            if rank == 0:
                break
    if best is None and attr is not None and path and path[0] != "self" and path[0] != name:
        # A store through a method of the root: `opt.add_param_group(…)`,
        # `model.register_buffer(…)`, `model.add_module(…)`.
        found = _oomkit_store_line(leaks, origin, path[0], None, path[:1])
        return found if found and found.get("rank") == 0 else None
    return best[2] if best else None


def _oomkit_quoted_lines(lines):
    """Line numbers inside triple-quoted strings (docstrings)."""
    out = set()
    inside = None
    for no, line in enumerate(lines, 1):
        rest = line
        touched = inside is not None
        while True:
            if inside is None:
                i3, i4 = rest.find('"""'), rest.find("\'\'\'")
                hits = [i for i in (i3, i4) if i >= 0]
                if not hits:
                    break
                i = min(hits)
                inside = rest[i:i + 3]
                rest = rest[i + 3:]
                touched = True
            else:
                j = rest.find(inside)
                if j < 0:
                    break
                rest = rest[j + 3:]
                inside = None
        if touched:
            out.add(no)
    return out


def _oomkit_function_end(lines, first):
    """The last line of the function that starts at `first` (by indentation)."""
    def indent(s):
        return len(s) - len(s.lstrip())

    head = lines[first - 1] if first - 1 < len(lines) else ""
    base = indent(head)
    # Skip decorators and the signature.
    no = first
    while no < len(lines) and not lines[no - 1].rstrip().endswith(":"):
        no += 1
    end = no
    for i in range(no, len(lines)):
        s = lines[i]
        if not s.strip() or s.lstrip().startswith("#"):
            continue
        if indent(s) <= base:
            break
        end = i + 1
    return end


def _oomkit_leaks_install(torch):
    import os

    env = os.environ
    path = env.get("OOMKIT_LEAKS_FILE")
    if not path:
        return
    try:
        steps = int(env.get("OOMKIT_LEAKS_STEPS", "10"))
    except ValueError:
        steps = 10
    marker = env.get("OOMKIT_LEAKS_MARKER") or None
    earlier = globals().get("_oomkit_leaks_state")
    if earlier is not None:
        # TensorFlow came first: the finer PyTorch grain takes over, its
        # first boundary starts the record's series again.
        earlier.off = True
        earlier.done = True
    leaks = _OomkitLeaks(torch, path, max(steps, 2), marker)
    global _oomkit_leaks_state
    _oomkit_leaks_state = leaks
    try:
        os.register_at_fork(after_in_child=lambda: setattr(leaks, "off", True))
    except Exception:
        pass
    _oomkit_leaks_dispatch(torch, leaks)
    _oomkit_leaks_clocks(torch, leaks, marker)
    import atexit

    atexit.register(lambda: leaks.finish(final=False))


def _oomkit_leaks_dispatch(torch, leaks):
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except Exception:
        leaks.fail("no TorchDispatchMode")
        return

    class _OomkitMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not leaks.off:
                try:
                    leaks.tag(out)
                except Exception:
                    leaks.fail("tag")
            return out

    try:
        _OomkitMode().__enter__()
    except Exception:
        leaks.fail("dispatch mode")


def _oomkit_leaks_clocks(torch, leaks, marker):
    import functools

    # Optimizer steps.
    try:
        import torch.optim.optimizer as optimizer

        optimizer.register_optimizer_step_post_hook(
            lambda opt, args, kwargs: leaks.boundary("optimizer"))
    except Exception:
        leaks.fail("optimizer hook")
    # Batches drawn from a DataLoader; what collation creates is a batch.
    try:
        import torch.utils.data.dataloader as dl

        base = dl._BaseDataLoaderIter
        original_next = base.__next__

        @functools.wraps(original_next)
        def __next__(self):
            leaks.boundary("dataloader")
            leaks.flags |= 2
            try:
                return original_next(self)
            finally:
                leaks.flags &= ~2

        base.__next__ = __next__
    except Exception:
        leaks.fail("dataloader hook")
    # create_graph / retain_graph: what autograd builds then is flagged.
    try:
        import torch.autograd as autograd

        def wrap(fn, position):
            @functools.wraps(fn)
            def inner(*args, **kwargs):
                flag = kwargs.get("create_graph", args[position] if len(args) > position else False)
                if not flag:
                    return fn(*args, **kwargs)
                leaks.flags |= 1
                try:
                    return fn(*args, **kwargs)
                finally:
                    leaks.flags &= ~1
            return inner

        # create_graph's position: grad(outputs, inputs, grad_outputs,
        # retain_graph, create_graph), backward(tensors, grad_tensors,
        # retain_graph, create_graph).
        autograd.grad = wrap(autograd.grad, 4)
        autograd.backward = wrap(autograd.backward, 3)
    except Exception:
        leaks.fail("autograd hook")
    if marker:
        _oomkit_leaks_marker(leaks, marker)


def _oomkit_leaks_marker(leaks, marker):
    import sys

    module, _, name = marker.partition(":")

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code.co_name != name.rsplit(".", 1)[-1]:
            return
        qual = getattr(code, "co_qualname", code.co_name)
        if qual != name and code.co_name != name:
            return
        if frame.f_globals.get("__name__") != module:
            return
        # Counted at the next op, outside this profile callback: Python
        # writes the callback's view of the frame's variables back into it.
        leaks.pending_marker = True

    try:
        sys.setprofile(profile)
    except Exception:
        leaks.fail("marker")


def _oomkit_extra_on_torch(torch):
    try:
        _oomkit_leaks_install(torch)
    except Exception:
        state = globals().get("_oomkit_leaks_state")
        if state is not None:
            state.fail("install")



# ---- TensorFlow/Keras: the coarse grain ----
#
# With OOMKIT_LEAKS_FILE set and torch not imported, `import tensorflow` (or
# `import keras`) starts a coarser hook: TensorFlow runs its ops in C++ and
# inside tf.function graphs, where no Python hook sees a tensor being made, so
# there are no creation sites. Steps come from a Keras Callback added to
# Model.fit/evaluate/predict (on_*_batch_end runs in Python per batch even when
# train_step is a tf.function), from optimizer.apply_gradients called eagerly
# (custom loops), or from --marker. At each boundary the same walk from the
# program's named holders (globals, the variables of its frames, containers,
# attributes of its objects, closures) counts, per holder, the bytes of the
# tensors, variables, Keras layers/models (their weights) and numpy arrays it
# reaches — from shape × dtype size, never reading a value — and each holder
# is one "site" of the record, so the same classification finds the holder
# whose bytes grow.

class _OomkitTFLeaks(_OomkitLeaks):
    def __init__(self, tf, path, steps, marker):
        self.torch = None
        self.tf = tf
        self.keras = None
        self.holder_info = {}
        self._start(tf, path, steps, marker,
                    {"framework": "tensorflow", "grain": "holders",
                     "tensorflow": str(getattr(tf, "__version__", "?"))})

    def add_excluded(self, mod):
        import os

        f = getattr(mod, "__file__", None)
        if f:
            d = os.path.dirname(os.path.abspath(f)).rstrip(os.sep) + os.sep
            if d not in self.exclude:
                self.exclude = self.exclude + (d,)
                self.user_cache = {}

    def holder_site(self, h):
        o = h["origin"]
        key = (o[1], 0, "%s|%s" % (o[3], h["text"]))
        idx = self.site_index.get(key)
        if idx is None:
            if len(self.sites) >= _OOMKIT_MAX_SITES:
                return None
            idx = len(self.sites)
            self.sites.append(key)
            self.site_index[key] = idx
        return idx

    def boundary(self, source):
        better = self.clock(source)
        if better is None:
            return
        self.busy = True
        try:
            if better:
                self.source = source
                self.boundary_count = 0
                self.history = []
                self.young_history = []
            self.boundary_count += 1
            b = self.boundary_count
            walk = _OomkitTFWalk(self)
            walk.run(self.roots(True))
            alive = {}
            for h in walk.holders:
                if h["bytes"] <= 0:
                    continue
                sid = self.holder_site(h)
                if sid is None:
                    continue
                alive[sid] = alive.get(sid, 0) + h["bytes"]
                self.holder_info[sid] = h
            self.step = b
            self._write_sites()
            self.history.append(alive)
            self.young_history.append({})
            self._write({"boundary": b, "source": source,
                         "alive": {str(k): v for k, v in alive.items()}, "young": {},
                         "tracked_bytes": sum(alive.values()), "graphs": {}})
        except Exception:
            self.fail("boundary")
            return
        finally:
            self.busy = False
        if b >= self.steps:
            self.finish(final=True)

    def analyse(self, final):
        for sid in self.candidates():
            h = self.holder_info.get(sid)
            if h is None:
                continue
            _, name, attr = _oomkit_path_text(h["path"])
            o = h["origin"]
            store = _oomkit_store_line(self, o, name, attr, h["path"])
            self._write({"candidate": sid, "bytes": h["bytes"], "unheld_bytes": 0,
                         "create_graph": False, "loader": False, "devices": [],
                         "holder": {"text": h["text"], "scope": o[0], "file": o[1], "function": o[3],
                                    "key": "%s|%s|%s|%s" % (o[0], o[1], o[3], h["text"]),
                                    "via": "held", "bytes": h["bytes"], "tensors": h["tensors"],
                                    "numel": h["numel"], "param": h["param"], "host": h["host"],
                                    "store": store}})


class _OomkitTFWalk:
    """Breadth-first from named roots; the first path that reaches a tensor,
    variable, Keras layer or numpy array names its holder."""

    def __init__(self, leaks):
        self.leaks = leaks
        self.holders = []
        self.holder_ids = {}
        self.seen = set()

    def _types(self):
        import sys

        tf = self.leaks.tf
        tensors, variables, layers = [], [], []
        for name in ("Tensor",):
            t = getattr(tf, name, None)
            if isinstance(t, type):
                tensors.append(t)
        t = getattr(tf, "Variable", None)
        if isinstance(t, type):
            variables.append(t)
        # Keras 3 (`keras`) and Keras 2 (`tf_keras`, TensorFlow's
        # `TF_USE_LEGACY_KERAS=1`) can both be loaded.
        for keras in {id(k): k for k in (sys.modules.get("keras"), sys.modules.get("tf_keras"),
                                         self.leaks.keras) if k is not None}.values():
            t = getattr(keras, "Variable", None)
            if isinstance(t, type):
                variables.append(t)
            t = getattr(getattr(keras, "layers", None), "Layer", None)
            if isinstance(t, type):
                layers.append(t)
        return tuple(tensors), tuple(variables), tuple(layers)

    def hold(self, path, origin, nbytes, numel, param=False, host=False):
        text = _oomkit_path_text(path)[0]
        key = (text, origin)
        hid = self.holder_ids.get(key)
        if hid is None:
            hid = len(self.holders)
            self.holder_ids[key] = hid
            self.holders.append({"path": path, "text": text, "origin": origin, "bytes": 0,
                                 "tensors": 0, "numel": 0, "param": False, "host": False})
        h = self.holders[hid]
        h["bytes"] += nbytes
        h["tensors"] += 1
        h["numel"] = max(h["numel"], numel)
        h["param"] |= param
        h["host"] |= host

    def run(self, roots):
        import collections
        import time
        import types

        tensors, variables, layers = self._types()
        skip_types = (type, types.ModuleType, str, bytes, int, float, bool, type(None), complex)
        q = collections.deque()
        for origin, name, value in roots:
            q.append((value, (name,), origin, 0))
        deadline = time.monotonic() + _OOMKIT_WALK_SECONDS
        visited = 0
        while q:
            obj, path, origin, depth = q.popleft()
            if isinstance(obj, skip_types):
                continue
            oid = id(obj)
            if oid in self.seen:
                continue
            self.seen.add(oid)
            visited += 1
            if visited > _OOMKIT_WALK_NODES or (visited & 1023) == 0 and time.monotonic() > deadline:
                break
            try:
                if variables and isinstance(obj, variables):
                    n, e = _oomkit_tf_size(obj)
                    self.hold(path, origin, n, e, param=True)
                    continue
                if tensors and isinstance(obj, tensors):
                    n, e = _oomkit_tf_size(obj)
                    self.hold(path, origin, n, e)
                    continue
                if layers and isinstance(obj, layers):
                    total, most = 0, 0
                    for w in list(getattr(obj, "weights", None) or ())[:_OOMKIT_WALK_ITEMS]:
                        if id(w) in self.seen:
                            continue
                        self.seen.add(id(w))
                        n, e = _oomkit_tf_size(w)
                        total += n
                        most = max(most, e)
                    self.hold(path, origin, total, most, param=True)
                    continue
                if type(obj).__name__ == "ndarray":
                    base = getattr(obj, "base", None)
                    if base is None or id(base) not in self.seen:
                        self.hold(path, origin, int(getattr(obj, "nbytes", 0)),
                                  int(getattr(obj, "size", 0)), host=True)
                    continue
            except Exception:
                continue
            if depth >= _OOMKIT_WALK_DEPTH:
                continue
            d = depth + 1
            try:
                for child, child_path in _oomkit_children(self.leaks, obj, path, (), ()):
                    q.append((child, child_path, origin, d))
            except Exception:
                continue


def _oomkit_tf_size(obj):
    """(bytes, elements) of a tensor or variable from its shape and dtype;
    never reads its value (0 for an unknown dimension or dtype)."""
    n = 1
    try:
        dims = list(obj.shape)
    except Exception:
        return 0, 0
    for d in dims:
        d = getattr(d, "value", d)
        if d is None:
            return 0, 0
        n *= int(d)
    dtype = getattr(obj, "dtype", None)
    size = getattr(dtype, "size", None)
    if not isinstance(size, int):
        try:
            import numpy

            size = numpy.dtype(str(getattr(dtype, "name", dtype))).itemsize
        except Exception:
            size = 0
    return n * size, n


def _oomkit_tf_install(tf):
    import os
    import sys

    if globals().get("_oomkit_leaks_state") is not None or "torch" in sys.modules:
        return
    env = os.environ
    path = env.get("OOMKIT_LEAKS_FILE")
    if not path:
        return
    try:
        steps = int(env.get("OOMKIT_LEAKS_STEPS", "10"))
    except ValueError:
        steps = 10
    marker = env.get("OOMKIT_LEAKS_MARKER") or None
    leaks = _OomkitTFLeaks(tf, path, max(steps, 2), marker)
    global _oomkit_leaks_state
    _oomkit_leaks_state = leaks
    try:
        os.register_at_fork(after_in_child=lambda: setattr(leaks, "off", True))
    except Exception:
        pass
    if marker:
        module, _, name = marker.partition(":")
        short = name.rsplit(".", 1)[-1]

        def profile(frame, event, arg):
            if event != "call" or frame.f_code.co_name != short:
                return
            qual = getattr(frame.f_code, "co_qualname", short)
            if (qual != name and short != name) or frame.f_globals.get("__name__") != module:
                return
            # Python writes this callback's view of `frame`'s variables back
            # into it afterwards: the walk leaves that frame alone.
            leaks.skip_frame = frame
            try:
                leaks.boundary("marker")
            finally:
                leaks.skip_frame = None

        try:
            sys.setprofile(profile)
        except Exception:
            leaks.fail("marker")
    import atexit

    atexit.register(lambda: leaks.finish(final=False))
    # Keras 3 (`keras`) or Keras 2 (`tf_keras`); one still being imported
    # (it imports tensorflow) is wrapped when its own import ends.
    for package in ("keras", "tf_keras"):
        keras = sys.modules.get(package)
        if keras is not None and hasattr(keras, "callbacks") and hasattr(keras, "optimizers"):
            _oomkit_tf_keras(keras)


def _oomkit_tf_keras(keras):
    """Adds the step callback to Model.fit/evaluate/predict and counts eager
    optimizer.apply_gradients calls."""
    import functools

    leaks = globals().get("_oomkit_leaks_state")
    if not isinstance(leaks, _OomkitTFLeaks) or getattr(keras, "_oomkit_leaks_wrapped", False):
        return
    try:
        keras._oomkit_leaks_wrapped = True
        leaks.keras = keras
        leaks.add_excluded(keras)
        base = keras.callbacks.Callback

        class _OomkitStepCallback(base):
            def on_train_batch_end(self, batch, logs=None):
                leaks.boundary("keras")

            def on_test_batch_end(self, batch, logs=None):
                leaks.boundary("keras")

            def on_predict_batch_end(self, batch, logs=None):
                leaks.boundary("keras")

        def wrap(fn, position):
            @functools.wraps(fn)
            def inner(self, *args, **kwargs):
                if leaks.off or leaks.done:
                    return fn(self, *args, **kwargs)
                if len(args) > position:
                    args = list(args)
                    args[position] = list(args[position] or []) + [_OomkitStepCallback()]
                else:
                    kwargs["callbacks"] = list(kwargs.get("callbacks") or []) + [_OomkitStepCallback()]
                return fn(self, *args, **kwargs)
            return inner

        model = keras.Model
        # The callbacks argument's position after self: fit(x, y, batch_size,
        # epochs, verbose, callbacks), evaluate(x, y, batch_size, verbose,
        # sample_weight, steps, callbacks), predict(x, batch_size, verbose,
        # steps, callbacks) (keras/src/trainers/trainer.py, Keras 3; the same
        # in Keras 2, tf_keras/src/engine/training.py).
        for name, position in (("fit", 5), ("evaluate", 6), ("predict", 4)):
            fn = getattr(model, name, None)
            if fn is not None:
                setattr(model, name, wrap(fn, position))
    except Exception:
        leaks.fail("keras callbacks")
    try:
        opt = keras.optimizers.Optimizer
        original = opt.apply_gradients
        tf = leaks.tf

        @functools.wraps(original)
        def apply_gradients(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            try:
                eager = tf.executing_eagerly()
            except Exception:
                eager = False
            if eager:
                leaks.boundary("optimizer")
            return out

        opt.apply_gradients = apply_gradients
    except Exception:
        leaks.fail("optimizer hook")


class _OomkitTFFinder:
    """Runs the coarse hook right after `import tensorflow` / `import keras`
    (or `import tf_keras`: Keras 2, also what `tf.keras` loads under
    `TF_USE_LEGACY_KERAS=1`)."""

    def find_spec(self, name, path=None, target=None):
        if name not in ("tensorflow", "keras", "tf_keras") or getattr(self, "busy", False):
            return None
        import importlib.util

        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            try:
                if name == "tensorflow":
                    _oomkit_tf_install(module)
                else:
                    import sys

                    tfm = sys.modules.get("tensorflow")
                    if tfm is not None:
                        _oomkit_tf_install(tfm)
                    _oomkit_tf_keras(module)
            except Exception:
                state = globals().get("_oomkit_leaks_state")
                if state is not None:
                    state.fail("install")

        loader.exec_module = exec_module
        return spec


def _oomkit_tf_start():
    import os
    import sys

    if not os.environ.get("OOMKIT_LEAKS_FILE"):
        return
    sys.meta_path.insert(0, _OomkitTFFinder())


try:
    _oomkit_tf_start()
except Exception:
    pass


# ---- oomkit run/probe hook follows ----
