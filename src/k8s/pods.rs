//! Pod names for the pod UIDs and container IDs that cgroups give: the node's pods, listed from
//! the API server (filtered to this node) on a background thread, cached, and looked up by
//! the sampler (outside the engine's lock) with no I/O beyond reading `/proc/<pid>/cgroup`
//! once per process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::cgroup::read_pod_ref;
use crate::config::KubernetesConfig;
use crate::snapshot::PodLabels;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    /// (container id without the runtime prefix, container name)
    pub containers: Vec<(String, String)>,
}

/// Pods of this node by UID.
pub type PodIndex = HashMap<String, PodInfo>;

#[derive(Deserialize)]
struct PodList {
    #[serde(default)]
    items: Vec<Pod>,
}

#[derive(Deserialize)]
struct Pod {
    metadata: Meta,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    container_statuses: Vec<ContainerStatus>,
    #[serde(default)]
    init_container_statuses: Vec<ContainerStatus>,
    #[serde(default)]
    ephemeral_container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerStatus {
    name: String,
    #[serde(default, rename = "containerID")]
    container_id: Option<String>,
}

/// `containerd://abc…` → `abc…`
fn strip_runtime(id: &str) -> &str {
    id.split_once("://").map(|(_, id)| id).unwrap_or(id)
}

/// Parse a Kubernetes `PodList` (the API server's and the kubelet's `/pods` answer alike).
pub fn parse_pod_list(json: &[u8]) -> Result<PodIndex, serde_json::Error> {
    let list: PodList = serde_json::from_slice(json)?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| !p.metadata.uid.is_empty())
        .map(|p| {
            let st = p.status.unwrap_or_default();
            let containers = st
                .container_statuses
                .into_iter()
                .chain(st.init_container_statuses)
                .chain(st.ephemeral_container_statuses)
                .filter_map(|c| {
                    c.container_id
                        .map(|id| (strip_runtime(&id).to_string(), c.name))
                })
                .collect();
            (
                p.metadata.uid,
                PodInfo {
                    namespace: p.metadata.namespace,
                    name: p.metadata.name,
                    containers,
                },
            )
        })
        .collect())
}

/// Labels for a process from its cgroup's pod reference and the pod index.
pub fn labels_for(
    pod_uid: &str,
    container_id: Option<&str>,
    index: &PodIndex,
) -> Option<PodLabels> {
    let pod = index.get(pod_uid)?;
    let container = container_id
        .and_then(|id| {
            pod.containers
                .iter()
                .find(|(cid, _)| cid == id || cid.starts_with(id) || id.starts_with(cid.as_str()))
        })
        .map(|(_, name)| name.clone())
        .unwrap_or_default();
    Some(PodLabels {
        namespace: pod.namespace.clone(),
        pod: pod.name.clone(),
        container,
    })
}

/// How to reach the pod list.
#[derive(Debug, Clone)]
pub struct PodSource {
    pub url: String,
    pub token: Option<String>,
    pub ca_file: Option<PathBuf>,
}

const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl PodSource {
    /// In-cluster API server, filtered to this node; `api_url` overrides the address.
    pub fn from_config(cfg: &KubernetesConfig) -> anyhow::Result<PodSource> {
        let node = if cfg.node_name.is_empty() {
            std::env::var("NODE_NAME").unwrap_or_default()
        } else {
            cfg.node_name.clone()
        };
        if node.is_empty() {
            anyhow::bail!(
                "kubernetes.node_name: empty and NODE_NAME is not set (the Helm chart sets it from spec.nodeName)"
            );
        }
        let base = if cfg.api_url.is_empty() {
            let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
                anyhow::anyhow!("kubernetes.api_url: empty and KUBERNETES_SERVICE_HOST is not set")
            })?;
            let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            format!("https://{host}:{port}")
        } else {
            cfg.api_url.trim_end_matches('/').to_string()
        };
        let token_file = cfg
            .token_file
            .clone()
            .unwrap_or_else(|| Path::new(SA_DIR).join("token"));
        let token = std::fs::read_to_string(&token_file)
            .ok()
            .map(|t| t.trim().to_string());
        let ca = cfg
            .ca_file
            .clone()
            .unwrap_or_else(|| Path::new(SA_DIR).join("ca.crt"));
        Ok(PodSource {
            url: format!("{base}/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"),
            token,
            ca_file: ca.exists().then_some(ca),
        })
    }

    fn agent(&self) -> anyhow::Result<ureq::Agent> {
        let mut b = ureq::AgentBuilder::new().timeout(Duration::from_secs(10));
        if let Some(ca) = &self.ca_file {
            let mut roots = rustls::RootCertStore::empty();
            let pem = std::fs::read(ca)?;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                roots.add(cert?)?;
            }
            let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
            b = b.tls_config(Arc::new(tls));
        }
        Ok(b.build())
    }

    pub fn fetch(&self) -> anyhow::Result<PodIndex> {
        let agent = self.agent()?;
        let mut req = agent.get(&self.url);
        if let Some(t) = &self.token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        let resp = req.call()?;
        let mut body = Vec::new();
        use std::io::Read;
        resp.into_reader().take(64 << 20).read_to_end(&mut body)?;
        Ok(parse_pod_list(&body)?)
    }
}

/// The sampler's view: cgroup → pod UID → names, from an index refreshed in the background.
pub struct KubeResolver {
    index: Arc<RwLock<PodIndex>>,
    proc_root: PathBuf,
    /// pid → when we last failed to resolve it, so a process outside any pod costs one
    /// cgroup read per `retry`, not one per sample.
    misses: HashMap<u32, Instant>,
    retry: Duration,
}

impl KubeResolver {
    pub fn new(index: Arc<RwLock<PodIndex>>, proc_root: PathBuf, retry: Duration) -> Self {
        KubeResolver {
            index,
            proc_root,
            misses: HashMap::new(),
            retry,
        }
    }

    /// Start the background refresh and return the resolver that reads its index.
    pub fn start(cfg: &KubernetesConfig, proc_root: PathBuf) -> anyhow::Result<KubeResolver> {
        let source = PodSource::from_config(cfg)?;
        let index = Arc::new(RwLock::new(PodIndex::new()));
        let shared = Arc::clone(&index);
        let every = cfg.refresh;
        std::thread::Builder::new()
            .name("k8s-pods".into())
            .spawn(move || loop {
                match source.fetch() {
                    Ok(pods) => {
                        tracing::debug!(pods = pods.len(), "pod list refreshed");
                        *shared.write().unwrap_or_else(|e| e.into_inner()) = pods;
                    }
                    Err(e) => tracing::warn!(error = %e, url = %source.url, "cannot list this node's pods"),
                }
                std::thread::sleep(every);
            })?;
        Ok(KubeResolver::new(
            index,
            proc_root,
            every.min(Duration::from_secs(10)),
        ))
    }

    /// The pod of `pid`: one read of its cgroup file, then the cached pod list. A process
    /// that is in no known pod is asked about again only after a while.
    pub fn resolve(&mut self, pid: u32) -> Option<PodLabels> {
        if self
            .misses
            .get(&pid)
            .is_some_and(|t| t.elapsed() < self.retry)
        {
            return None;
        }
        if self.misses.len() > 4096 {
            let retry = self.retry;
            self.misses.retain(|_, t| t.elapsed() < retry);
        }
        let found = read_pod_ref(pid, &self.proc_root).and_then(|r| {
            let index = self.index.read().unwrap_or_else(|e| e.into_inner());
            labels_for(&r.pod_uid, r.container_id.as_deref(), &index)
        });
        match &found {
            Some(_) => {
                self.misses.remove(&pid);
            }
            None => {
                self.misses.insert(pid, Instant::now());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD_LIST: &str = r#"{
      "kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "12345"},
      "items": [
        {"metadata": {"name": "trainer-0", "namespace": "ml", "uid": "6f1e2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"},
         "spec": {"nodeName": "gpu-node-1"},
         "status": {"phase": "Running",
           "initContainerStatuses": [{"name": "fetch", "containerID": "containerd://1111111111111111111111111111111111111111111111111111111111111111"}],
           "containerStatuses": [
             {"name": "pytorch", "containerID": "containerd://8b2f0c9e2a5d4c7e9f1a3b5c7d9e1f2a3b4c5d6e7f8091a2b3c4d5e6f7a8b9c0"},
             {"name": "sidecar", "containerID": "cri-o://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}},
        {"metadata": {"name": "pending", "namespace": "ml", "uid": "00000000-0000-0000-0000-000000000001"},
         "status": {"phase": "Pending"}}
      ]}"#;

    #[test]
    fn parses_a_pod_list() {
        let idx = parse_pod_list(POD_LIST.as_bytes()).unwrap();
        assert_eq!(idx.len(), 2);
        let p = &idx["6f1e2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"];
        assert_eq!((p.namespace.as_str(), p.name.as_str()), ("ml", "trainer-0"));
        assert_eq!(p.containers.len(), 3);
        assert!(idx["00000000-0000-0000-0000-000000000001"]
            .containers
            .is_empty());
    }

    #[test]
    fn labels_from_cgroup_and_index() {
        let idx = parse_pod_list(POD_LIST.as_bytes()).unwrap();
        let cg = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1e2b3c_4d5e_6f70_8192_a3b4c5d6e7f8.slice/cri-containerd-8b2f0c9e2a5d4c7e9f1a3b5c7d9e1f2a3b4c5d6e7f8091a2b3c4d5e6f7a8b9c0.scope\n";
        let r = crate::k8s::cgroup::parse_cgroup(cg).unwrap();
        let l = labels_for(&r.pod_uid, r.container_id.as_deref(), &idx).unwrap();
        assert_eq!(
            l,
            PodLabels {
                namespace: "ml".into(),
                pod: "trainer-0".into(),
                container: "pytorch".into()
            }
        );
        // A pod the index does not know yet: no labels (retried later).
        assert!(labels_for("nope", None, &idx).is_none());
    }

    #[test]
    fn resolver_reads_proc_and_caches_misses() {
        let dir = tempfile::tempdir().unwrap();
        let proc_dir = dir.path().join("4242");
        std::fs::create_dir_all(&proc_dir).unwrap();
        std::fs::write(
            proc_dir.join("cgroup"),
            "12:memory:/kubepods/burstable/pod6f1e2b3c-4d5e-6f70-8192-a3b4c5d6e7f8/8b2f0c9e2a5d4c7e9f1a3b5c7d9e1f2a3b4c5d6e7f8091a2b3c4d5e6f7a8b9c0\n",
        )
        .unwrap();
        let index = Arc::new(RwLock::new(PodIndex::new()));
        let mut r = KubeResolver::new(
            Arc::clone(&index),
            dir.path().into(),
            Duration::from_secs(3600),
        );
        assert!(r.resolve(4242).is_none(), "index still empty");
        *index.write().unwrap() = parse_pod_list(POD_LIST.as_bytes()).unwrap();
        assert!(
            r.resolve(4242).is_none(),
            "a miss is cached until the retry time"
        );
        r.misses.clear();
        assert_eq!(r.resolve(4242).unwrap().container, "pytorch");
    }

    #[test]
    fn fetches_from_an_api_server() {
        // A plain-HTTP stand-in for the API server on loopback.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let body = POD_LIST.as_bytes();
            write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .unwrap();
            s.write_all(body).unwrap();
            req
        });
        let cfg = KubernetesConfig {
            api_url: format!("http://{addr}"),
            node_name: "gpu-node-1".into(),
            token_file: Some("/nonexistent".into()),
            ca_file: Some("/nonexistent".into()),
            ..KubernetesConfig::default()
        };
        let idx = PodSource::from_config(&cfg).unwrap().fetch().unwrap();
        assert_eq!(idx.len(), 2);
        let req = server.join().unwrap();
        assert!(
            req.starts_with("GET /api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-node-1 "),
            "{req}"
        );
    }
}
