//! The NVML backend: `libnvidia-ml.so.1`, loaded at run time by nvml-wrapper.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::device::Backend;
use crate::model::{DeviceMemory, ErrorKind, GpuIdentity, MigInstance};

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
#[derive(Clone)]
struct Installed {
    nvml: &'static Nvml,
    /// Physical GPUs NVML lists.
    parents: u32,
    /// The memory domains sampled: each GPU, or each MIG instance of a GPU in MIG mode (a job
    /// runs out of its instance's memory, not of the GPU's).
    domains: Arc<[Domain]>,
}

struct Domain {
    /// The handle, or why NVML would not give one (a GPU off the bus): that GPU is down, with
    /// this kind, until NVML is initialised again; the others are read as ever.
    device: Result<Device<'static>, ErrorKind>,
    parent: u32,
    pci_bus_id: String,
    mig: Option<MigInstance>,
}

/// The profile in a MIG device's name (`NVIDIA A100-SXM4-40GB MIG 3g.20gb` -> `3g.20gb`).
fn mig_profile(name: &str) -> String {
    name.rsplit_once(" MIG ")
        .map_or(name, |(_, p)| p)
        .trim()
        .to_string()
}

/// NVML's GPU instance id of a MIG device (nvml-wrapper has no call for it).
fn gpu_instance_id(nvml: &Nvml, d: &Device<'static>) -> Option<u32> {
    let f = nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref().ok()?;
    let mut id: std::os::raw::c_uint = 0;
    // SAFETY: a MIG device handle of this library, and a valid place for the id.
    let rc = unsafe { f(d.handle(), &mut id) };
    (rc == 0).then_some(id)
}

/// The memory domains of GPU `index`: its MIG instances when MIG is on, else the GPU itself.
fn domains_of(nvml: &'static Nvml, index: u32) -> Result<Vec<Domain>, NvmlError> {
    let d = nvml.device_by_index(index)?;
    let pci_bus_id = d.pci_info().map(|p| p.bus_id).unwrap_or_default();
    // NVML_DEVICE_MIG_ENABLE: only the current mode counts; a pending one needs a reset.
    if d.mig_mode().is_ok_and(|m| m.current == 1) {
        let mut out = Vec::new();
        for slot in 0..d.mig_device_count().unwrap_or(0) {
            // Slots without an instance answer NotFound.
            let Ok(m) = d.mig_device_by_index(slot) else {
                continue;
            };
            let profile = mig_profile(&m.name().unwrap_or_default());
            let gpu_instance = gpu_instance_id(nvml, &m).unwrap_or(slot);
            out.push(Domain {
                device: Ok(m),
                parent: index,
                pci_bus_id: pci_bus_id.clone(),
                mig: Some(MigInstance {
                    gpu_instance,
                    profile,
                }),
            });
        }
        return Ok(out);
    }
    Ok(vec![Domain {
        device: Ok(d),
        parent: index,
        pci_bus_id,
        mig: None,
    }])
}

/// GPU `index` when NVML gives no handle for it: one domain, down with the handle's error.
fn unreachable(index: u32, e: &NvmlError) -> Domain {
    Domain {
        device: Err(kind(e)),
        parent: index,
        pci_bus_id: String::new(),
        mig: None,
    }
}

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
        let parents = nvml.device_count().map_err(|e| kind(&e))?;
        let mut domains = Vec::new();
        for i in 0..parents {
            // One GPU that NVML cannot reach must not cost the others their metrics.
            match domains_of(nvml, i) {
                Ok(d) => domains.extend(d),
                Err(e) => {
                    tracing::warn!(gpu = i, error = %e, "NVML gives no handle for this GPU: it is reported down");
                    domains.push(unreachable(i, &e));
                }
            }
        }
        let count = domains.len() as u32;
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some(Installed {
            nvml,
            parents,
            domains: domains.into(),
        });
        Ok(count)
    }

    fn installed(&self) -> Option<Installed> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn with<T>(
        &self,
        index: u32,
        f: impl FnOnce(&Device<'static>, &Domain) -> Result<T, NvmlError>,
    ) -> Result<T, ErrorKind> {
        let installed = self.installed().ok_or(ErrorKind::Driver)?;
        let d = installed
            .domains
            .get(index as usize)
            .ok_or(ErrorKind::GpuLost)?;
        let device = d.device.as_ref().map_err(|k| *k)?;
        f(device, d).map_err(|e| kind(&e))
    }
}

impl Backend for NvmlBackend {
    fn init(&self) -> Result<u32, ErrorKind> {
        if let Some(i) = self.installed() {
            // First call after `open`: reuse what open() installed.
            if let Ok(n) = i.nvml.device_count() {
                // A GPU without a handle has none after a second initialisation either.
                let answers =
                    |d: &Domain| d.device.as_ref().map_or(true, |h| h.memory_info().is_ok());
                if n == i.parents && i.domains.iter().all(answers) {
                    return Ok(i.domains.len() as u32);
                }
            }
        }
        let nvml = Nvml::init().map_err(|e| kind(&e))?;
        self.install(nvml)
    }

    fn identity(&self, index: u32) -> Result<GpuIdentity, ErrorKind> {
        self.with(index, |device, d| {
            Ok(GpuIdentity {
                index: d.parent,
                uuid: device.uuid()?,
                // The uuid names the GPU; a name NVML will not give is no reason to lose it.
                name: device.name().unwrap_or_default(),
                pci_bus_id: d.pci_bus_id.clone(),
                mig: d.mig.clone(),
            })
        })
    }

    fn memory(&self, index: u32) -> Result<DeviceMemory, ErrorKind> {
        self.with(index, |device, _| {
            // nvml-wrapper's memory_info is nvmlDeviceGetMemoryInfo_v2: used excludes reserved.
            let m = device.memory_info()?;
            Ok(DeviceMemory {
                total: m.total,
                reserved: m.reserved,
                used: m.used,
                free: m.free,
            })
        })
    }

    fn processes(&self, index: u32) -> Result<Vec<(u32, u64)>, ErrorKind> {
        self.with(index, |device, _| {
            let mut out: Vec<(u32, u64)> = Vec::new();
            let compute = device.running_compute_processes()?;
            // Graphics processes are not supported on every part (compute-only boards).
            let graphics = device.running_graphics_processes().unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::mig_profile;

    #[test]
    fn the_profile_is_the_end_of_a_mig_devices_name() {
        assert_eq!(mig_profile("NVIDIA A100-SXM4-40GB MIG 3g.20gb"), "3g.20gb");
        assert_eq!(
            mig_profile("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me"),
            "1g.10gb+me"
        );
        // A name without it is kept whole rather than lost.
        assert_eq!(
            mig_profile("NVIDIA H100 80GB HBM3"),
            "NVIDIA H100 80GB HBM3"
        );
    }
}
