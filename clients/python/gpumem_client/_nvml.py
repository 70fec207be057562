"""The few NVML calls the recorder needs, through ctypes: the client stays standard-library only.

Only what a trace needs: device memory (v1 and v2, for the driver's reserve), the compute
processes and their bytes, the device's name and UUID. Every call raises ``NvmlError`` on a
non-zero return; nothing here is called on the training thread.
"""

import ctypes
from typing import Any, Dict, List, Optional

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7
# usedGpuMemory when the driver cannot say (e.g. Windows WDDM): not a byte count.
NVML_VALUE_NOT_AVAILABLE = (1 << 64) - 1


class NvmlError(RuntimeError):
    pass


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _MemoryV2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _ProcessInfo(ctypes.Structure):
    # nvmlProcessInfo_t as _v3 of the process queries fills it.
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


_MEMORY_V2_VERSION = ctypes.sizeof(_MemoryV2) | (2 << 24)


class Device:
    """One GPU, by NVML index."""

    def __init__(self, lib: Any, index: int) -> None:
        self._lib = lib
        self.index = index
        self._handle = ctypes.c_void_p()
        _check(lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self._handle)))
        self.uuid = self._string(lib.nvmlDeviceGetUUID)
        self.name = self._string(lib.nvmlDeviceGetName)
        self._has_v2 = hasattr(lib, "nvmlDeviceGetMemoryInfo_v2")

    def _string(self, fn: Any) -> str:
        buf = ctypes.create_string_buffer(96)
        _check(fn(self._handle, buf, ctypes.c_uint(96)))
        return buf.value.decode("utf-8", "replace")

    def memory(self) -> Dict[str, int]:
        """Fields of a trace's ``nvml`` part: total, used, free, v2_reserved, v2_used."""
        m = _Memory()
        _check(self._lib.nvmlDeviceGetMemoryInfo(self._handle, ctypes.byref(m)))
        out = {"total": int(m.total), "used": int(m.used), "free": int(m.free)}
        if self._has_v2:
            m2 = _MemoryV2()
            m2.version = _MEMORY_V2_VERSION
            if self._lib.nvmlDeviceGetMemoryInfo_v2(self._handle, ctypes.byref(m2)) == NVML_SUCCESS:
                out["v2_reserved"] = int(m2.reserved)
                out["v2_used"] = int(m2.used)
        return out

    def processes(self) -> List[Dict[str, int]]:
        """Every compute process on the device with the bytes NVML charges it."""
        count = ctypes.c_uint(0)
        fn = self._lib.nvmlDeviceGetComputeRunningProcesses_v3
        rc = fn(self._handle, ctypes.byref(count), None)
        if rc == NVML_SUCCESS:
            return []
        if rc != NVML_ERROR_INSUFFICIENT_SIZE:
            _check(rc)
        # Processes may start between the two calls: leave room.
        n = count.value + 8
        infos = (_ProcessInfo * n)()
        count = ctypes.c_uint(n)
        _check(fn(self._handle, ctypes.byref(count), infos))
        out = []
        for info in infos[: count.value]:
            used = int(info.usedGpuMemory)
            out.append({"pid": int(info.pid), "used": 0 if used == NVML_VALUE_NOT_AVAILABLE else used})
        return out


def _check(rc: int) -> None:
    if rc != NVML_SUCCESS:
        raise NvmlError("NVML call failed with code %d" % rc)


_lib = None  # type: Optional[Any]


def device_count() -> int:
    """How many GPUs NVML sees (loads and initialises it first)."""
    lib = _load()
    n = ctypes.c_uint(0)
    _check(lib.nvmlDeviceGetCount_v2(ctypes.byref(n)))
    return int(n.value)


def open_device(index: int) -> Device:
    """Load libnvidia-ml.so.1 once, initialise it, and open GPU ``index``."""
    return Device(_load(), index)


def _load() -> Any:
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as e:
            raise NvmlError("libnvidia-ml.so.1 not found (is the NVIDIA driver installed?): %s" % e)
        _check(lib.nvmlInit_v2())
        _lib = lib
    return _lib
