"""Reading allocator statistics from PyTorch and JAX, without importing either.

Both frameworks are looked up in ``sys.modules`` only: a process that has not imported one is
never made to import it, and a process that has not initialised CUDA is never made to.
"""

import ctypes
import logging
import re
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

log = logging.getLogger("gpumem_client")

# 2^53: the exporter rejects larger byte counts as absurd.
MAX_COUNT = 1 << 53
# The exporter rejects a device whose allocated bytes exceed its reserved bytes by more.
ALLOCATED_SLACK = 1 << 20

# Protocol field -> key in torch.cuda.memory_stats().
TORCH_FIELDS = (
    ("allocated_bytes", "allocated_bytes.all.current"),
    ("reserved_bytes", "reserved_bytes.all.current"),
    ("active_bytes", "active_bytes.all.current"),
    ("inactive_split_bytes", "inactive_split_bytes.all.current"),
    ("segments", "segment.all.current"),
    ("alloc_retries", "num_alloc_retries"),
    ("ooms", "num_ooms"),
    ("allocated_peak_bytes", "allocated_bytes.all.peak"),
    ("reserved_peak_bytes", "reserved_bytes.all.peak"),
)

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def count(value: Any) -> Optional[int]:
    """A protocol integer (0 <= n <= 2^53), or None for anything else."""
    if value is None or isinstance(value, bool):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if n < 0 or n > MAX_COUNT:
        return None
    return n


def device_entry(
    uuid: str,
    allocator: str,
    values: Iterable[Tuple[str, Any]],
    largest_free_block: Any = None,
) -> Optional[Dict[str, Any]]:
    """One ``devices[]`` item, or None when the required fields are missing or inconsistent."""
    entry = {"uuid": uuid, "allocator": allocator}  # type: Dict[str, Any]
    for field, raw in values:
        n = count(raw)
        if n is not None:
            entry[field] = n
    if "allocated_bytes" not in entry or "reserved_bytes" not in entry:
        return None
    if entry["allocated_bytes"] > entry["reserved_bytes"] + ALLOCATED_SLACK:
        return None
    lfb = count(largest_free_block)
    if lfb is not None:
        entry["largest_free_block_bytes"] = lfb
    return entry


def torch_entry(
    uuid: str, stats: Mapping[str, Any], largest_free_block: Any = None
) -> Optional[Dict[str, Any]]:
    """A ``devices[]`` item from a ``torch.cuda.memory_stats()`` mapping."""
    get = stats.get
    return device_entry(
        uuid, "pytorch", [(field, get(key)) for field, key in TORCH_FIELDS], largest_free_block
    )


def format_uuid(raw: Any) -> Optional[str]:
    """NVML's spelling of a device UUID (``GPU-xxxxxxxx-...``) from what PyTorch gives."""
    if raw is None:
        return None
    text = str(raw).strip()
    if text[:4] in ("GPU-", "MIG-"):
        return text if len(text) > 4 else None
    if _UUID_RE.match(text):
        return "GPU-" + text.lower()
    data = getattr(raw, "bytes", raw)
    if isinstance(data, (bytes, bytearray)) and len(data) == 16:
        return "GPU-" + _hex_uuid(bytes(data))
    return None


def _hex_uuid(b: bytes) -> str:
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def largest_free_blocks(segments: Iterable[Mapping[str, Any]]) -> Dict[int, int]:
    """Largest inactive block per device index in a ``torch.cuda.memory_snapshot()``.

    A segment whose free bytes (total minus allocated) cannot beat the best block found so
    far is skipped without looking at its blocks, so the cost is mostly the snapshot itself.
    """
    best = {}  # type: Dict[int, int]
    for seg in segments:
        device = seg.get("device", 0)
        current = best.get(device, 0)
        if device not in best:
            best[device] = 0
        total = seg.get("total_size")
        used = seg.get("allocated_size")
        if total is not None and used is not None and total - used <= current:
            continue
        for block in seg.get("blocks", ()):
            if block.get("state") == "inactive":
                size = block.get("size", 0)
                if size > current:
                    current = size
        best[device] = current
    return best


class TorchCollector:
    """Per-device statistics of PyTorch's CUDA caching allocator."""

    # A snapshot slower than this makes the collector take them less often.
    SLOW_SNAPSHOT_S = 0.02

    def __init__(self) -> None:
        self._uuids = {}  # type: Dict[int, Optional[str]]
        self.snapshot_scale = 1
        self.last_snapshot_s = 0.0

    @staticmethod
    def cuda() -> Any:
        """``torch.cuda`` when torch is imported and CUDA is initialised here, else None."""
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        cuda = getattr(torch, "cuda", None)
        if cuda is None:
            return None
        is_initialized = getattr(cuda, "is_initialized", None)
        if is_initialized is None or not is_initialized():
            return None
        return cuda

    def uuid(self, cuda: Any, index: int) -> Optional[str]:
        if index in self._uuids:
            return self._uuids[index]
        uuid = None
        try:
            uuid = format_uuid(getattr(cuda.get_device_properties(index), "uuid", None))
        except Exception as e:  # an old PyTorch without .uuid, or a broken device
            log.debug("gpumem: no UUID for cuda:%d: %s", index, e)
        if uuid is None:
            log.debug("gpumem: cuda:%d has no usable UUID; it is not reported", index)
        self._uuids[index] = uuid
        return uuid

    def uuid_if_known(self, index: int) -> Optional[str]:
        return self._uuids.get(index)

    @staticmethod
    def stats(cuda: Any, index: int) -> Mapping[str, Any]:
        """The keys of TORCH_FIELDS for one device, read the cheapest way available."""
        nested_fn = getattr(cuda, "memory_stats_as_nested_dict", None)
        if nested_fn is not None:
            # Skips the flattening and sorting of ~250 keys that memory_stats() does.
            nested = nested_fn(index)
            if nested:
                flat = {}  # type: Dict[str, Any]
                for _, key in TORCH_FIELDS:
                    value = nested
                    for part in key.split("."):
                        if not isinstance(value, Mapping):
                            value = None
                            break
                        value = value.get(part)
                    flat[key] = value
                return flat
        return cuda.memory_stats(index)

    def collect(self, snapshot: bool) -> List[Dict[str, Any]]:
        cuda = self.cuda()
        if cuda is None:
            return []
        n = cuda.device_count()
        per_device = []  # type: List[Tuple[str, Mapping[str, Any], int]]
        for index in range(n):
            stats = self.stats(cuda, index)
            if not stats:
                continue
            # A device this process's allocator never touched is not one it uses.
            if not stats.get("reserved_bytes.all.current") and not stats.get(
                "reserved_bytes.all.peak"
            ):
                continue
            uuid = self.uuid(cuda, index)
            if uuid is None:
                continue
            per_device.append((uuid, stats, index))
        if not per_device:
            return []
        free = {}  # type: Dict[int, int]
        if snapshot:
            free = self.largest_free(cuda)
        out = []
        for uuid, stats, index in per_device:
            entry = torch_entry(uuid, stats, free.get(index, 0) if snapshot else None)
            if entry is not None:
                out.append(entry)
        return out

    def largest_free(self, cuda: Any) -> Dict[int, int]:
        t0 = time.perf_counter()
        try:
            segments = cuda.memory_snapshot()
        finally:
            self.last_snapshot_s = time.perf_counter() - t0
        if self.last_snapshot_s > self.SLOW_SNAPSHOT_S and self.snapshot_scale < 64:
            # A large or history-recording allocator makes snapshots expensive.
            self.snapshot_scale *= 2
            log.debug(
                "gpumem: memory_snapshot() took %.1f ms; taking it %dx less often",
                self.last_snapshot_s * 1e3,
                self.snapshot_scale,
            )
        return largest_free_blocks(segments)


def _jax_backends_initialized() -> bool:
    """True only when JAX has already created its backends (never creates them)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:
        return False
    fn = getattr(bridge, "backends_are_initialized", None)
    if fn is not None:
        return bool(fn())
    return bool(getattr(bridge, "_backends", None))


class _CudaDriverUuids:
    """Device UUIDs through the CUDA driver (libcuda), by CUDA ordinal; standard library only."""

    def __init__(self) -> None:
        self._lib = None  # type: Any
        self._failed = False
        self._cache = {}  # type: Dict[int, Optional[str]]

    def __call__(self, ordinal: int) -> Optional[str]:
        if ordinal in self._cache:
            return self._cache[ordinal]
        uuid = None
        try:
            lib = self._load()
            if lib is not None:
                dev = ctypes.c_int()
                if lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)) == 0:
                    buf = ctypes.create_string_buffer(16)
                    if lib.cuDeviceGetUuid(buf, dev) == 0:
                        uuid = "GPU-" + _hex_uuid(buf.raw[:16])
        except Exception as e:
            log.debug("gpumem: libcuda UUID lookup failed: %s", e)
        self._cache[ordinal] = uuid
        return uuid

    def _load(self) -> Any:
        if self._lib is None and not self._failed:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
                if lib.cuInit(0) != 0:
                    raise OSError("cuInit failed")
                self._lib = lib
            except Exception as e:
                self._failed = True
                log.debug("gpumem: libcuda not usable: %s", e)
        return self._lib


class JaxCollector:
    """Per-device statistics of JAX's (XLA's) GPU allocator."""

    def __init__(self, uuid_of: Optional[Callable[[int], Optional[str]]] = None) -> None:
        self.uuid_of = uuid_of or _CudaDriverUuids()

    def collect(self, skip_uuids: Iterable[str] = ()) -> List[Dict[str, Any]]:
        jax = sys.modules.get("jax")
        if jax is None or not _jax_backends_initialized():
            return []
        skip = set(skip_uuids)
        out = []
        for device in jax.local_devices():
            if getattr(device, "platform", None) not in ("gpu", "cuda"):
                continue
            stats = device.memory_stats()
            if not stats:
                continue
            ordinal = getattr(device, "local_hardware_id", None)
            if ordinal is None:
                ordinal = getattr(device, "id", None)
            if ordinal is None:
                continue
            uuid = self.uuid_of(int(ordinal))
            if uuid is None or uuid in skip:
                continue
            entry = jax_entry(uuid, stats)
            if entry is not None:
                out.append(entry)
        return out


def jax_entry(uuid: str, stats: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A ``devices[]`` item from a JAX ``device.memory_stats()`` mapping.

    XLA's BFC allocator reports what it holds from the driver as ``pool_bytes``;
    ``bytes_reserved`` is used where there is no pool figure. Nothing is made up: a device
    whose figures do not give a consistent reserved >= allocated is left out.
    """
    reserved = stats.get("pool_bytes")
    if reserved is None:
        reserved = stats.get("bytes_reserved")
    reserved_peak = stats.get("peak_pool_bytes")
    if reserved_peak is None:
        reserved_peak = stats.get("peak_bytes_reserved")
    return device_entry(
        uuid,
        "jax",
        [
            ("allocated_bytes", stats.get("bytes_in_use")),
            ("reserved_bytes", reserved),
            ("allocated_peak_bytes", stats.get("peak_bytes_in_use")),
            ("reserved_peak_bytes", reserved_peak),
        ],
        stats.get("largest_free_block_bytes"),
    )
