# Written by oomkit for one run (crates/oomkit_probe/src/hook/); safe to delete.
#
# oomkit puts this file's folder first on PYTHONPATH. It runs the
# sitecustomize it shadows (if any), then waits for `import torch`; in the
# main process (not multiprocessing workers):
#   OOMKIT_PEAK_FILE       at exit, if CUDA was initialised, writes max over
#                          devices of torch.cuda.max_memory_reserved() (bytes)
#   OOMKIT_SNAPSHOT_DIR    when CUDA initialises, queued with
#                          torch.cuda._lazy_call (PyTorch's own queue of calls
#                          deferred to CUDA initialisation):
#                          torch.cuda.memory._record_memory_history(max_entries=
#                          OOMKIT_SNAPSHOT_MAX_ENTRIES) and, on the first OOM,
#                          torch.cuda.memory._dump_snapshot() into that folder
#                          as oom-snapshot-rank<RANK>-pid<PID>.pickle, from
#                          torch._C._cuda_attach_out_of_memory_observer
# It changes nothing the program sees: it never initialises CUDA (no
# torch.cuda.is_available() at import, so CUDA_VISIBLE_DEVICES and
# PYTORCH_CUDA_ALLOC_CONF set after `import torch` still apply, and forked
# workers find CUDA uninitialised), never prints (the output stays
# byte-exact) and never raises.
import os as _oomkit_os
import sys as _oomkit_sys


def _oomkit_chain():
    import importlib.machinery
    import importlib.util

    here = _oomkit_os.path.dirname(_oomkit_os.path.abspath(__file__))
    paths = [
        p for p in _oomkit_sys.path if _oomkit_os.path.abspath(p or ".") != here
    ]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    _oomkit_sys.modules["_oomkit_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _oomkit_main_process():
    try:
        import multiprocessing

        return multiprocessing.parent_process() is None
    except Exception:
        return True


def _oomkit_rank():
    env = _oomkit_os.environ
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
        value = env.get(key, "")
        if value.isdigit():
            return value
    return "0"


def _oomkit_start_history(torch, folder):
    """Runs when CUDA initialises (from torch.cuda._lazy_call's queue)."""
    try:
        entries = int(_oomkit_os.environ.get("OOMKIT_SNAPSHOT_MAX_ENTRIES", "100000"))
        torch.cuda.memory._record_memory_history(max_entries=entries)
        name = "oom-snapshot-rank%s-pid%d.pickle" % (_oomkit_rank(), _oomkit_os.getpid())
        path = _oomkit_os.path.join(folder, name)
        dumped = []

        def _oomkit_on_oom(device, alloc, device_alloc, device_free):
            if dumped:
                return
            dumped.append(True)
            try:
                torch.cuda.memory._dump_snapshot(path)
            except Exception:
                pass

        torch._C._cuda_attach_out_of_memory_observer(_oomkit_on_oom)
    except Exception:
        # An exception here would fail the program's CUDA initialisation.
        pass


def _oomkit_on_torch(torch):
    if not _oomkit_main_process():
        return
    # Another capability's part of the hook, written before this script by
    # oomkit_probe::hook::Hook::install (oomkit leaks).
    extra = globals().get("_oomkit_extra_on_torch")
    if extra is not None:
        try:
            extra(torch)
        except Exception:
            pass
    env = _oomkit_os.environ
    folder = env.get("OOMKIT_SNAPSHOT_DIR")
    if folder:
        try:
            lazy_call = torch.cuda._lazy_call
        except Exception:
            lazy_call = None
        if lazy_call is not None:
            try:
                # Runs now if CUDA is already initialised, else when it is.
                lazy_call(lambda: _oomkit_start_history(torch, folder))
            except Exception:
                pass
    peak = env.get("OOMKIT_PEAK_FILE")
    if peak:
        import atexit

        def _oomkit_write_peak():
            try:
                if not torch.cuda.is_initialized():
                    return
                n = torch.cuda.device_count()
                most = max(torch.cuda.max_memory_reserved(d) for d in range(n))
                with open(peak, "w") as f:
                    f.write(str(int(most)))
            except Exception:
                pass

        atexit.register(_oomkit_write_peak)


class _OomkitTorchFinder:
    """Runs _oomkit_on_torch right after `import torch` finishes."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.util

        try:
            _oomkit_sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _oomkit_on_torch(module)

        loader.exec_module = exec_module
        return spec


try:
    _oomkit_chain()
finally:
    if "torch" in _oomkit_sys.modules:
        _oomkit_on_torch(_oomkit_sys.modules["torch"])
    else:
        _oomkit_sys.meta_path.insert(0, _OomkitTorchFinder())
