"""Just enough of torch's CUDA side for the recorder's per-process sampler: stats, device
choice, UUIDs and the out-of-memory observer. GPU UUIDs come from FAKE_TORCH_UUIDS."""

import os
import threading

__version__ = "0.0+standin"


class OutOfMemoryError(RuntimeError):
    pass


class _Props:
    def __init__(self, uuid):
        self.uuid = uuid


class _C:
    observers = []

    @staticmethod
    def _cuda_attach_out_of_memory_observer(fn):
        _C.observers.append(fn)


class _Cuda:
    def __init__(self):
        self.uuids = os.environ.get("FAKE_TORCH_UUIDS", "").split(",")
        # The current device is per thread, as in torch: a sampler thread never sees the main
        # thread's set_device.
        self._local = threading.local()
        self.stats = {}

    def is_initialized(self):
        return True

    def device_count(self):
        return len(self.uuids)

    def current_device(self):
        return getattr(self._local, "device", 0)

    def set_device(self, index):
        self._local.device = index

    def get_device_properties(self, index):
        return _Props(self.uuids[index])

    def memory_stats(self, index=None):
        return self.stats.get(self.current_device() if index is None else index, {})

    def memory_snapshot(self):
        return []

    def allocate(self, index, nbytes):
        self.stats[index] = {
            "allocated_bytes.all.current": nbytes,
            "reserved_bytes.all.current": nbytes,
            "allocated_bytes.all.peak": nbytes,
            "reserved_bytes.all.peak": nbytes,
            "num_alloc_retries": 0,
            "num_ooms": 0,
        }

    def out_of_memory(self, index, request, free):
        for fn in _C.observers:
            fn(index, request, self.stats[index]["allocated_bytes.all.current"], free)
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % request)


cuda = _Cuda()
