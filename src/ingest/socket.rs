//! The ingest socket's file, owned: one exporter per path, and only the exporter that made the
//! socket ever removes it.
//!
//! An exporter holds an exclusive lock on `<socket>.lock` (with its pid in it) for as long as it
//! runs; the kernel drops the lock when the process ends, however it ends. A second exporter
//! started on the same path (a second instance by mistake, an update that starts the new one
//! before the old one stops) finds the lock taken, or a socket that answers, and refuses to
//! start, instead of replacing the live socket and leaving the first one serving none. A socket
//! file that nobody answers on is what a killed exporter leaves behind: it is replaced. On the
//! way out the exporter removes the socket only if the file is still the one it bound.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Another process serves on the socket: the exporter does not start.
#[derive(Debug, thiserror::Error)]
#[error("ingest.socket: {path} is in use by {holder}; stop it first, or give this exporter another --ingest.socket")]
pub struct SocketInUse {
    pub path: String,
    pub holder: String,
}

/// The bound socket; dropping it removes the file if it is still ours, then lets go of the
/// lock.
pub struct OwnedSocket {
    path: PathBuf,
    /// Device and inode of the socket file this exporter bound.
    id: (u64, u64),
    _lock: File,
}

fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Take the exclusive lock on `<socket>.lock` without waiting, and write our pid into it.
fn take_lock(socket: &Path) -> anyhow::Result<File> {
    let path = lock_path(socket);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| {
            anyhow::anyhow!(
                "ingest.socket: cannot create the lock file {} beside the socket: {e}",
                path.display()
            )
        })?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            let holder = match pid.trim() {
                "" => format!("another exporter (it holds {})", path.display()),
                pid => format!("another exporter, pid {pid} (it holds {})", path.display()),
            };
            return Err(SocketInUse {
                path: socket.display().to_string(),
                holder,
            }
            .into());
        }
        anyhow::bail!("ingest.socket: cannot lock {}: {e}", path.display());
    }
    f.set_len(0)?;
    f.rewind()?;
    writeln!(f, "{}", std::process::id())?;
    Ok(f)
}

/// The longest path a Unix socket can be bound at: `sun_path` holds 108 bytes on Linux, the
/// last one the terminating NUL.
pub const MAX_PATH_BYTES: usize = 107;

/// What stands at `path` where a socket should be, in words; `None` for nothing, or a socket.
fn not_a_socket(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let ft = meta.file_type();
    let what = if ft.is_socket() {
        return None;
    } else if ft.is_symlink() {
        // Never followed: whoever can write the folder could point it anywhere.
        "is a symbolic link, which the exporter does not follow; give the socket's own path"
    } else if ft.is_dir() {
        "is a directory; give the path of the socket file inside it, e.g. <dir>/ingest.sock"
    } else if ft.is_file() {
        "is a regular file, not a socket; remove it if nothing needs it, or choose another path"
    } else {
        "exists and is not a socket (a device or a pipe); choose another path"
    };
    Some(format!("ingest.socket: {} {what}", path.display()))
}

/// Bind the Unix socket with the configured mode: refused when another process serves on it,
/// a stale socket file replaced, any other file left alone.
pub fn bind(path: &Path, mode: u32) -> anyhow::Result<(tokio::net::UnixListener, OwnedSocket)> {
    if path.as_os_str().len() > MAX_PATH_BYTES {
        anyhow::bail!(
            "ingest.socket: {} is {} bytes long; a Unix socket's path holds at most {MAX_PATH_BYTES}",
            path.display(),
            path.as_os_str().len()
        );
    }
    // Before the lock, so that a wrong path leaves no lock file beside it.
    if let Some(why) = not_a_socket(path) {
        anyhow::bail!(why);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("ingest.socket: cannot create {}: {e}", dir.display()))?;
    }
    let lock = take_lock(path)?;
    if std::fs::symlink_metadata(path).is_ok() {
        // Only ever remove a socket, never a file someone put there (since the check above).
        if let Some(why) = not_a_socket(path) {
            anyhow::bail!(why);
        }
        // An exporter older than the lock, or another program: alive if it answers.
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(SocketInUse {
                    path: path.display().to_string(),
                    holder: "a process that accepts connections on it".into(),
                }
                .into())
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path)?;
            }
            Err(e) => anyhow::bail!(
                "ingest.socket: cannot tell whether {} is in use: {e}",
                path.display()
            ),
        }
    }
    let l = tokio::net::UnixListener::bind(path)
        .map_err(|e| anyhow::anyhow!("ingest.socket: cannot bind {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    let meta = std::fs::symlink_metadata(path)?;
    Ok((
        l,
        OwnedSocket {
            path: path.to_path_buf(),
            id: (meta.dev(), meta.ino()),
            _lock: lock,
        },
    ))
}

impl OwnedSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path still holds the socket this exporter bound; if not, why (removed by
    /// a cleaner of temporary files, replaced by another program): clients can no longer
    /// reach this exporter there.
    pub fn check(&self) -> Result<(), String> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_socket() && (m.dev(), m.ino()) == self.id => Ok(()),
            Ok(_) => Err(format!(
                "{} is no longer the socket this exporter bound (replaced)",
                self.path.display()
            )),
            Err(e) => Err(format!(
                "{} is gone ({e}): removed after the exporter bound it",
                self.path.display()
            )),
        }
    }
}

/// How often the socket's path is looked at.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// Look at the socket's path every `WATCH_INTERVAL` until `stop`: once it no longer holds
/// the socket this exporter bound, the listener is down (`gpumem_exporter_ingest_up` 0, and
/// readiness fails where the path was configured), said once in the log.
pub async fn watch(
    owned: std::sync::Arc<OwnedSocket>,
    status: std::sync::Arc<crate::connections::ConnectionCounters>,
    stop: impl std::future::Future<Output = ()>,
) {
    let listener = status.of(crate::connections::Listener::IngestSocket);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
            _ = &mut stop => return,
        }
        if let Err(why) = owned.check() {
            tracing::error!(
                socket = %owned.path().display(),
                reason = %why,
                "allocator reports can no longer reach this exporter: its ingest socket is gone; restart it to bind the socket again"
            );
            listener.set_down(why);
            return;
        }
    }
}

impl Drop for OwnedSocket {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.id);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_second_bind_is_refused_and_a_stale_socket_replaced() {
        let rt = rt();
        let _in_rt = rt.enter();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.sock");
        let (l, owned) = bind(&path, 0o600).unwrap();
        let e = bind(&path, 0o600)
            .err()
            .expect("refused while the first holds it");
        let in_use = e.downcast_ref::<SocketInUse>().expect("SocketInUse");
        assert!(
            in_use.holder.contains(&std::process::id().to_string()),
            "{e}"
        );
        drop((l, owned));
        assert!(!path.exists(), "the owner removed its socket");
        // A socket file nobody answers on (its exporter was killed): replaced.
        let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(stale);
        assert!(path.exists());
        let (_l, _owned) = bind(&path, 0o600).unwrap();
    }

    #[test]
    fn a_live_socket_without_the_lock_is_not_replaced() {
        let rt = rt();
        let _in_rt = rt.enter();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.sock");
        let _other = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let e = bind(&path, 0o600).err().expect("refused");
        assert!(e.downcast_ref::<SocketInUse>().is_some(), "{e}");
        assert!(path.exists());
    }

    #[test]
    fn the_owner_leaves_a_socket_it_did_not_make() {
        let rt = rt();
        let _in_rt = rt.enter();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.sock");
        let (l, owned) = bind(&path, 0o600).unwrap();
        // Someone else's socket now stands at the path.
        std::fs::remove_file(&path).unwrap();
        let _theirs = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop((l, owned));
        assert!(path.exists(), "a socket this exporter did not make stays");
    }
}
