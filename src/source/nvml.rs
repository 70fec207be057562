//! The NVML backend: `libnvidia-ml.so.1`, loaded at run time by nvml-wrapper.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::device::Backend;
use crate::model::{DeviceMemory, ErrorKind, GpuIdentity};

/// Shown when NVML cannot be loaded at all.
pub const NO_NVML_HINT: &str =
    "run with --source sim to use the built-in simulator on a machine without NVIDIA GPUs";

pub struct NvmlBackend {
    // Device handles borrow the library; each (re)initialisation leaks one small `Nvml` so the
    // handles can live in worker threads for the life of the process. Re-initialisation happens
    // only after a driver reload.
    state: RwLock<Option<Installed>>,
}

/// Calls take a copy of these and run without the lock: a call that hangs holding it would
/// make the next initialisation wait for the write lock, and every later call behind that.
type Installed = (&'static Nvml, Arc<[Device<'static>]>);

fn kind(e: &NvmlError) -> ErrorKind {
    match e {
        NvmlError::GpuLost => ErrorKind::GpuLost,
        NvmlError::NotSupported => ErrorKind::NotSupported,
        NvmlError::Timeout => ErrorKind::Timeout,
        NvmlError::NotFound => ErrorKind::ProcessGone,
        NvmlError::DriverNotLoaded
        | NvmlError::Uninitialized
        | NvmlError::LibraryNotFound
        | NvmlError::LibloadingError(_)
        | NvmlError::FailedToLoadSymbol(_)
        | NvmlError::Unknown => ErrorKind::Driver,
        _ => ErrorKind::Other,
    }
}

impl NvmlBackend {
    /// Load NVML once, so that a machine without it gets one clear error at start, and one
    /// whose driver hangs gets one within `deadline`: the process exits and whoever runs it
    /// (systemd, Kubernetes) starts it again. The stuck thread cannot be cancelled; it goes
    /// with the process.
    pub fn open(deadline: Duration) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("nvml-init".into())
            .spawn(move || {
                // Sent too late, the backend is dropped unread: its `Nvml` is leaked, so that
                // runs no nvmlShutdown either.
                let _ = tx.send(Self::load());
            })?;
        match rx.recv_timeout(deadline) {
            Ok(loaded) => loaded,
            Err(RecvTimeoutError::Timeout) => Err(anyhow::anyhow!(
                "NVML did not initialise within {} (the longer of nvml.deadline and 30 s): the driver does not answer",
                humantime::format_duration(deadline)
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err(anyhow::anyhow!("NVML panicked while initialising"))
            }
        }
    }

    fn load() -> anyhow::Result<Self> {
        let nvml = Nvml::init().map_err(|e| {
            anyhow::anyhow!("NVML is not available on this machine ({e}); {NO_NVML_HINT}")
        })?;
        let b = NvmlBackend {
            state: RwLock::new(None),
        };
        b.install(nvml).map_err(|k| {
            anyhow::anyhow!(
                "NVML loaded but listing GPUs failed ({}); {NO_NVML_HINT}",
                k.as_str()
            )
        })?;
        Ok(b)
    }

    fn install(&self, nvml: Nvml) -> Result<u32, ErrorKind> {
        // Leaked at once and never shut down, on re-initialisation neither (no `Nvml` is ever
        // dropped, so no nvmlShutdown runs): readers stuck in calls may still use an earlier
        // initialisation's handles, which a shutdown would pull from under them, and after a
        // driver reload nvmlShutdown can hang like any call.
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        let count = nvml.device_count().map_err(|e| kind(&e))?;
        let devices = (0..count)
            .map(|i| nvml.device_by_index(i))
            .collect::<Result<Arc<[_]>, _>>()
            .map_err(|e| kind(&e))?;
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some((nvml, devices));
        Ok(count)
    }

    fn installed(&self) -> Option<Installed> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn with<T>(
        &self,
        index: u32,
        f: impl FnOnce(&Device<'static>) -> Result<T, NvmlError>,
    ) -> Result<T, ErrorKind> {
        let (_, devices) = self.installed().ok_or(ErrorKind::Driver)?;
        let d = devices.get(index as usize).ok_or(ErrorKind::GpuLost)?;
        f(d).map_err(|e| kind(&e))
    }
}

impl Backend for NvmlBackend {
    fn init(&self) -> Result<u32, ErrorKind> {
        if let Some((nvml, devices)) = self.installed() {
            // First call after `open`: reuse what open() installed.
            if let Ok(n) = nvml.device_count() {
                if n as usize == devices.len() && devices.iter().all(|d| d.memory_info().is_ok()) {
                    return Ok(n);
                }
            }
        }
        let nvml = Nvml::init().map_err(|e| kind(&e))?;
        self.install(nvml)
    }

    fn identity(&self, index: u32) -> Result<GpuIdentity, ErrorKind> {
        self.with(index, |d| {
            Ok(GpuIdentity {
                index,
                uuid: d.uuid()?,
                name: d.name()?,
                pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
            })
        })
    }

    fn memory(&self, index: u32) -> Result<DeviceMemory, ErrorKind> {
        self.with(index, |d| {
            // nvml-wrapper's memory_info is nvmlDeviceGetMemoryInfo_v2: used excludes reserved.
            let m = d.memory_info()?;
            Ok(DeviceMemory {
                total: m.total,
                reserved: m.reserved,
                used: m.used,
                free: m.free,
            })
        })
    }

    fn processes(&self, index: u32) -> Result<Vec<(u32, u64)>, ErrorKind> {
        self.with(index, |d| {
            let mut out: Vec<(u32, u64)> = Vec::new();
            let compute = d.running_compute_processes()?;
            // Graphics processes are not supported on every part (compute-only boards).
            let graphics = d.running_graphics_processes().unwrap_or_default();
            for p in compute.into_iter().chain(graphics) {
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => b,
                    UsedGpuMemory::Unavailable => 0,
                };
                match out.iter_mut().find(|(pid, _)| *pid == p.pid) {
                    // A process in both lists (or twice under MIG) is one process.
                    Some(existing) => existing.1 = existing.1.max(used),
                    None => out.push((p.pid, used)),
                }
            }
            Ok(out)
        })
    }
}
