//! Pod and container identity from a process's cgroup path.
//!
//! `/proc/<pid>/cgroup` has one line per hierarchy, `ID:CONTROLLERS:PATH`:
//! many lines on cgroup v1 (`4:memory:/kubepods/...`), a single `0::/...` on
//! cgroup v2, both on hybrid hosts. The kubelet places every container of a pod
//! under a per-pod cgroup, and the container runtime names the container's own
//! cgroup after its ID. The layouts met in practice:
//!
//! | cgroup driver | pod segment | container segment |
//! | --- | --- | --- |
//! | systemd | `kubepods-burstable-pod<uid with _>.slice` (`kubepods-pod…` for Guaranteed) | `cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope` |
//! | cgroupfs | `/kubepods/besteffort/pod<uid>` (`/kubepods/pod<uid>` for Guaranteed) | `<id>` |
//!
//! The systemd driver writes the pod UID with `_` instead of `-` (a `-` means
//! nesting in a slice name); it is converted back. Static pods have a 32-hex UID
//! (a hash of their manifest) instead of a UUID.
//!
//! Paths are shown relative to the *reader's* cgroup namespace. A containerised
//! exporter on cgroup v2 usually has a private cgroup namespace, so a process of
//! another pod appears as `0::/../../kubepods-besteffort-pod<uid>.slice/…`
//! with no `kubepods.slice` root: leading `..` segments count as "somewhere
//! under the kubelet's hierarchy" for the cgroupfs layout, and the systemd
//! slice name carries `kubepods` by itself.
//!
//! Everything here but [`read_pod_ref`] is pure string work: no I/O, std only.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The Kubernetes identity a cgroup path reveals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// `metadata.uid` of the pod, with dashes (`6f1e2b3c-4d5e-6f70-8192-a3b4c5d6e7f8`),
    /// or the 32-hex UID of a static pod.
    pub pod_uid: String,
    /// The runtime's container ID (64 lowercase hex), when the process is inside
    /// a container's cgroup and not only the pod's.
    pub container_id: Option<String>,
}

/// The most bytes [`read_pod_ref`] reads from a cgroup file. Real files are a
/// few hundred bytes; the cap keeps a strange `/proc` from costing memory.
pub const MAX_CGROUP_FILE_BYTES: u64 = 64 * 1024;

/// Parses the contents of a `/proc/<pid>/cgroup` file.
///
/// Returns `None` for processes outside Kubernetes pods (host services,
/// `user.slice` sessions, plain Docker containers). When several lines name a
/// pod (cgroup v1), the first one that also names a container wins.
#[must_use]
pub fn parse_cgroup(contents: &str) -> Option<PodRef> {
    let mut pod_only: Option<PodRef> = None;
    for line in contents.lines() {
        let Some(path) = cgroup_line_path(line) else {
            continue;
        };
        if let Some(found) = parse_cgroup_path(path) {
            if found.container_id.is_some() {
                return Some(found);
            }
            if pod_only.is_none() {
                pod_only = Some(found);
            }
        }
    }
    pod_only
}

/// Parses one cgroup path (the third field of a line), e.g.
/// `/kubepods/burstable/pod<uid>/<id>`.
#[must_use]
pub fn parse_cgroup_path(path: &str) -> Option<PodRef> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();

    // Only a `pod<uid>` below `kubepods` (or above the reader's cgroup namespace
    // root) is a pod: other software may name cgroups `pod…` too.
    let mut under_kubelet = false;
    for (index, segment) in segments.iter().enumerate() {
        let uid = systemd_pod_uid(segment).or_else(|| {
            if under_kubelet {
                cgroupfs_pod_uid(segment)
            } else {
                None
            }
        });
        if let Some(pod_uid) = uid {
            return Some(PodRef {
                pod_uid,
                container_id: container_after_pod(&segments[index + 1..]),
            });
        }
        if *segment == "kubepods" || *segment == ".." {
            under_kubelet = true;
        }
    }
    None
}

/// Reads `<proc_root>/<pid>/cgroup` and parses it. `None` when the process is
/// gone, the file cannot be read, or the process is not in a pod.
#[must_use]
pub fn read_pod_ref(pid: u32, proc_root: &Path) -> Option<PodRef> {
    let file = File::open(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_CGROUP_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    parse_cgroup(&String::from_utf8_lossy(&bytes))
}

/// The path of a `ID:CONTROLLERS:PATH` line, or `None` when the line is not one.
fn cgroup_line_path(line: &str) -> Option<&str> {
    let mut fields = line.trim_end().splitn(3, ':');
    let id = fields.next()?;
    let _controllers = fields.next()?;
    let path = fields.next()?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || !path.starts_with('/') {
        return None;
    }
    Some(path)
}

/// `kubepods-burstable-pod6f1e2b3c_4d5e_….slice` → `6f1e2b3c-4d5e-…`.
/// The slice's parent part must mention `kubepods` (`kubepods`,
/// `kubepods-besteffort`, `kubelet-kubepods-burstable` under a custom cgroup root).
fn systemd_pod_uid(segment: &str) -> Option<String> {
    let name = segment.strip_suffix(".slice")?;
    let (parent, uid) = name.rsplit_once("-pod")?;
    if !parent.split('-').any(|part| part == "kubepods") {
        return None;
    }
    let uid = uid.replace('_', "-");
    is_pod_uid(&uid).then_some(uid)
}

/// `pod6f1e2b3c-4d5e-….` → `6f1e2b3c-4d5e-…` (cgroupfs driver).
fn cgroupfs_pod_uid(segment: &str) -> Option<String> {
    let uid = segment.strip_prefix("pod")?;
    is_pod_uid(uid).then(|| uid.to_string())
}

/// A UUID (8-4-4-4-12 hex) or a static pod's 32-hex hash.
fn is_pod_uid(uid: &str) -> bool {
    let bytes = uid.as_bytes();
    match bytes.len() {
        32 => bytes.iter().all(u8::is_ascii_hexdigit),
        36 => bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        }),
        _ => false,
    }
}

/// The container below the pod's cgroup: its ID. Only the first container-looking
/// segment counts; deeper cgroups a container creates for itself (or a
/// Docker-in-Docker daemon's `docker/<id>`) do not change which pod container the
/// process belongs to.
fn container_after_pod(rest: &[&str]) -> Option<String> {
    let first = rest.first()?;
    if let Some(id) = container_segment(first) {
        return Some(id.to_string());
    }
    // A `docker` parent between the pod and the container ID.
    if *first == "docker" {
        return rest
            .get(1)
            .filter(|s| is_container_id(s))
            .map(|id| id.to_string());
    }
    None
}

/// Runtimes' scope names under the systemd driver: containerd, CRI-O, Docker.
const SCOPE_PREFIXES: [&str; 3] = ["cri-containerd-", "crio-", "docker-"];

fn container_segment(segment: &str) -> Option<&str> {
    if let Some(name) = segment.strip_suffix(".scope") {
        // CRI-O's per-container monitor process: in the pod, in no container.
        if name.starts_with("crio-conmon-") {
            return None;
        }
        for prefix in SCOPE_PREFIXES {
            if let Some(id) = name.strip_prefix(prefix) {
                return is_container_id(id).then_some(id);
            }
        }
        return None;
    }
    is_container_id(segment).then_some(segment)
}

/// Container IDs of containerd, CRI-O and Docker: 64 lowercase hex digits.
fn is_container_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6f1e2b3c-4d5e-6f70-8192-a3b4c5d6e7f8";
    const UID_SYSTEMD: &str = "6f1e2b3c_4d5e_6f70_8192_a3b4c5d6e7f8";
    const STATIC_UID: &str = "8d6a2f0c4b3e1a9f7c5d2e0b4a6c8e1f";
    const CID: &str = "4a1f5c2e9b7d3e8f0a6c4b2d1e9f7a5c3b8d6e4f2a0c9b7d5e3f1a8c6b4d2e0f";
    const NODE_CID: &str = "e2c9d71b5a3f48c6b0d4e8a2f6c1b9d3e7a5f0c8b2d6e4a1f9c3b7d5e0a8f2c4";

    fn pod(container: Option<&str>) -> Option<PodRef> {
        Some(PodRef {
            pod_uid: UID.to_string(),
            container_id: container.map(str::to_string),
        })
    }

    #[test]
    fn fixtures_are_well_formed() {
        assert_eq!(CID.len(), 64);
        assert_eq!(NODE_CID.len(), 64);
        assert!(is_container_id(CID) && is_container_id(NODE_CID));
        assert!(is_pod_uid(UID) && is_pod_uid(STATIC_UID));
    }

    #[test]
    fn v2_systemd_containerd_burstable() {
        let file = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn v2_systemd_containerd_guaranteed_has_no_qos_slice() {
        let file = format!(
            "0::/kubepods.slice/kubepods-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn v2_systemd_crio_besteffort() {
        let file = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_SYSTEMD}.slice/crio-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn crio_conmon_is_in_the_pod_but_no_container() {
        let file = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/crio-conmon-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(None));
    }

    #[test]
    fn v2_systemd_docker_scope() {
        let file = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/docker-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn v1_cgroupfs_burstable_full_file() {
        let p = format!("/kubepods/burstable/pod{UID}/{CID}");
        let file = format!(
            "12:hugetlb:{p}\n11:freezer:{p}\n10:perf_event:{p}\n9:pids:{p}\n\
             8:net_cls,net_prio:{p}\n7:devices:{p}\n6:cpuset:{p}\n5:blkio:{p}\n\
             4:memory:{p}\n3:cpu,cpuacct:{p}\n2:rdma:/\n1:name=systemd:{p}\n0::/\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn v1_cgroupfs_besteffort_and_guaranteed() {
        let besteffort = format!("4:memory:/kubepods/besteffort/pod{UID}/{CID}\n");
        assert_eq!(parse_cgroup(&besteffort), pod(Some(CID)));
        let guaranteed = format!("4:memory:/kubepods/pod{UID}/{CID}\n");
        assert_eq!(parse_cgroup(&guaranteed), pod(Some(CID)));
    }

    #[test]
    fn v1_systemd_driver_crio_full_file() {
        let p = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/crio-{CID}.scope"
        );
        let file = format!(
            "11:cpuset:{p}\n10:memory:{p}\n9:devices:{p}\n8:pids:{p}\n7:hugetlb:{p}\n\
             6:freezer:{p}\n5:net_cls,net_prio:{p}\n4:cpu,cpuacct:{p}\n3:perf_event:{p}\n\
             2:blkio:{p}\n1:name=systemd:{p}\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn v2_cgroupfs_driver() {
        // k3s and other distributions that keep the cgroupfs driver on cgroup v2.
        let file = format!("0::/kubepods/besteffort/pod{UID}/{CID}\n");
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn pod_level_cgroup_without_container() {
        let file = format!("0::/kubepods/burstable/pod{UID}\n");
        assert_eq!(parse_cgroup(&file), pod(None));
        let truncated = format!("0::/kubepods/burstable/pod{UID}/{}\n", &CID[..12]);
        assert_eq!(parse_cgroup(&truncated), pod(None));
    }

    #[test]
    fn kind_node_inside_docker_v2_systemd() {
        // kind runs the kubelet in a Docker container with `--cgroup-root=/kubelet`:
        // the node container's docker scope comes before the pod and is not the container.
        let file = format!(
            "0::/system.slice/docker-{NODE_CID}.scope/kubelet.slice/kubelet-kubepods.slice/\
             kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod{UID_SYSTEMD}.slice/\
             cri-containerd-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn kubepods_inside_docker_v1_cgroupfs() {
        // minikube / kind with cgroupfs on cgroup v1: the node is `/docker/<id>`.
        let file = format!(
            "9:memory:/docker/{NODE_CID}/kubepods/besteffort/pod{UID}/{CID}\n\
             1:name=systemd:/docker/{NODE_CID}/kubepods/besteffort/pod{UID}/{CID}\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn docker_in_docker_sidecar_belongs_to_the_dind_container() {
        let file = format!("4:memory:/kubepods/burstable/pod{UID}/{CID}/docker/{NODE_CID}\n");
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
        let docker_parent = format!("4:memory:/kubepods/burstable/pod{UID}/docker/{CID}\n");
        assert_eq!(parse_cgroup(&docker_parent), pod(Some(CID)));
    }

    #[test]
    fn nested_cgroup_inside_the_container() {
        let file = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope/init.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn relative_to_a_private_cgroup_namespace() {
        // Read from inside another pod's container (cgroupns=private on v2).
        let same_qos = format!(
            "0::/../../kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&same_qos), pod(Some(CID)));
        let other_qos = format!(
            "0::/../../../kubepods-besteffort.slice/kubepods-besteffort-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&other_qos), pod(Some(CID)));
        let cgroupfs = format!("0::/../../../besteffort/pod{UID}/{CID}\n");
        assert_eq!(parse_cgroup(&cgroupfs), pod(Some(CID)));
    }

    #[test]
    fn static_pod_hash_uid() {
        let file = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{STATIC_UID}.slice/cri-containerd-{CID}.scope\n"
        );
        let found = parse_cgroup(&file).unwrap();
        assert_eq!(found.pod_uid, STATIC_UID);
        assert_eq!(found.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn deleted_cgroup_suffix() {
        let file = format!("0::/kubepods/burstable/pod{UID}/{CID} (deleted)\n");
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn hybrid_host_prefers_the_line_with_a_container() {
        let file = format!(
            "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_SYSTEMD}.slice\n\
             0::/\n\
             4:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn non_kubernetes_processes() {
        let cases = [
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1c2d3e4f.scope\n".to_string(),
            "0::/user.slice/user-1000.slice/session-3.scope\n".to_string(),
            "0::/init.scope\n".to_string(),
            "0::/system.slice/nvidia-persistenced.service\n".to_string(),
            format!("0::/system.slice/docker-{CID}.scope\n"),
            format!("12:memory:/docker/{CID}\n1:name=systemd:/docker/{CID}\n"),
            format!("0::/machine.slice/libpod-{CID}.scope/container\n"),
            "0::/\n".to_string(),
            String::new(),
        ];
        for file in cases {
            assert_eq!(parse_cgroup(&file), None, "{file:?}");
        }
    }

    #[test]
    fn pod_like_names_outside_kubepods_are_ignored() {
        let cases = [
            format!("0::/system.slice/pod{UID}/{CID}\n"),
            format!("0::/machine.slice/machine-pod{UID_SYSTEMD}.slice/{CID}\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podnot_a_uid.slice/cri-containerd-{CID}.scope\n"),
            format!("0::/kubepods/burstable/pod{}/{CID}\n", &UID[..30]),
        ];
        for file in cases {
            assert_eq!(parse_cgroup(&file), None, "{file:?}");
        }
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let file = format!(
            "garbage\nno:path\nx::/kubepods/pod{UID}/{CID}\n0::relative/pod{UID}\n0::/kubepods/pod{UID}/{CID}\n"
        );
        assert_eq!(parse_cgroup(&file), pod(Some(CID)));
    }

    #[test]
    fn wrong_case_or_length_container_ids_are_not_ids() {
        let upper = CID.to_uppercase();
        let file = format!(
            "0::/kubepods.slice/kubepods-pod{UID_SYSTEMD}.slice/cri-containerd-{upper}.scope\n"
        );
        assert_eq!(parse_cgroup(&file), pod(None));
    }

    #[test]
    fn read_pod_ref_from_a_proc_tree() {
        let root = std::env::temp_dir().join(format!(
            "gpumem-cgroup-test-{}-{}",
            std::process::id(),
            line!()
        ));
        let dir = root.join("4242");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("cgroup"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope\n"),
        )
        .unwrap();
        let found = read_pod_ref(4242, &root);
        let missing = read_pod_ref(4243, &root);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(found, pod(Some(CID)));
        assert_eq!(missing, None);
    }
}
