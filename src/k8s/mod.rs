//! Kubernetes awareness: which pod and container a GPU process belongs to.
//!
//! The exporter runs as a DaemonSet with `hostPID`, so the pids NVML reports are
//! visible in its `/proc`. A process's cgroup path (`/proc/<pid>/cgroup`) names
//! the pod UID and the container ID that the kubelet and the container runtime
//! gave it; [`cgroup::parse_cgroup`] extracts them without talking to the API
//! server. [`pods`] turns a pod UID into `namespace`/`pod`/`container` names from
//! the node's pod list, fetched from the API server in the background.

pub mod cgroup;
pub mod pods;
