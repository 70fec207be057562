"""Tests of the Helm chart in helm/gpumem-exporter.

Helm's own engine (lint, render, values schema) comes from the `helm-python-sdk` package, so
no helm binary is needed; `kubernetes-validate` checks every rendered manifest against the
Kubernetes OpenAPI schemas in strict mode. ServiceMonitor and PrometheusRule are CRDs that
kubernetes-validate does not know: their structure is checked here field by field.

The chart's files/alerts and files/dashboards are links to the repository's alerts/ and
grafana/ folders. The render tests run on a copy of the chart whose links point at those same
folders; only when one of them has nothing to embed yet is a placeholder used in its stead,
written in the test's temporary directory (never in the repository).

Run with tests/helm/run.sh.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import tarfile
import warnings
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "gpumem-exporter"
ALERTS = REPO / "alerts"
GRAFANA = REPO / "grafana"

RELEASE = "gpumem"
NAMESPACE = "gpu-monitoring"
FULLNAME = "gpumem-gpumem-exporter"

# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest schemas
# kubernetes-validate ships.
KUBE_VERSIONS = ["1.25.0", kubernetes_validate.utils.latest_version()]

# Values that switch on every optional part of the chart.
ALL_OPTIONS: dict[str, Any] = {
    "image": {"repository": "registry.example.com/ml/gpumem-exporter", "tag": "0.1.0-rc1"},
    "imagePullSecrets": [{"name": "regcred"}],
    "logLevel": "debug",
    "logFormat": "json",
    "config": {"analysis": {"peak_window": "10m"}, "history": {"max_processes": 128}},
    "extraArgs": ["--sample-interval=500ms", "--ingest.socket-mode=0660"],
    "extraEnv": [{"name": "RUST_BACKTRACE", "value": "1"}],
    "runtimeClassName": "nvidia",
    "priorityClassName": "system-node-critical",
    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
    "podAnnotations": {"example.com/team": "ml-platform"},
    "podLabels": {"team": "ml-platform"},
    "updateStrategy": {"type": "OnDelete"},
    "runAsNonRoot": True,
    "supplementalGroups": [44],
    "serviceAccount": {"annotations": {"example.com/owner": "sre"}},
    "service": {"annotations": {"prometheus.io/scrape": "true"}, "labels": {"tier": "monitoring"}},
    "serviceMonitor": {
        "enabled": True,
        "interval": "30s",
        "scrapeTimeout": "20s",
        "labels": {"release": "kube-prometheus-stack"},
        "relabelings": [
            {"action": "replace", "targetLabel": "cluster", "replacement": "train-eu-1"}
        ],
        "metricRelabelings": [
            {"action": "drop", "sourceLabels": ["__name__"], "regex": "gpumem_exporter_.*"}
        ],
    },
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "dashboards": {
        "enabled": True,
        "namespace": "grafana",
        "annotations": {"grafana_folder": "GPU"},
    },
}

PLACEHOLDER_RULES = """\
groups:
  - name: placeholder.recording
    rules:
      - record: instance:gpumem_used_bytes:sum
        expr: sum by (instance) (gpumem_used_bytes)
  - name: placeholder.alerts
    rules:
      - alert: GpumemPlaceholder
        expr: max(gpumem_oom_risk_level) >= 3
        for: 1m
        labels:
          severity: critical
        annotations:
          summary: "{{ $labels.instance }} placeholder"
"""

PLACEHOLDER_DASHBOARD = {
    "title": "placeholder",
    "uid": "gpumem-placeholder",
    "schemaVersion": 39,
    "panels": [],
}


# --- helpers -------------------------------------------------------------------------------


def rule_files(alerts_dir: Path) -> list[Path]:
    """The Prometheus rule files of a folder: top-level *.yaml with a `groups` list."""
    files = []
    for path in sorted(alerts_dir.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict) and isinstance(doc.get("groups"), list):
            files.append(path)
    return files


def dashboard_files(grafana_dir: Path) -> list[Path]:
    return sorted(grafana_dir.glob("*.json"))


def render(chart: Path, values: dict[str, Any] | None = None) -> dict[str, str]:
    with helm.Chart.load(chart) as loaded:
        return loaded.render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)


def manifests(chart: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    docs = []
    for path, text in sorted(render(chart, values).items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return docs


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    return pod["containers"][0]


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in c.get("env", [])}


def schema_error(chart: Path, values: dict[str, Any]) -> str:
    with helm.Chart.load(chart) as loaded:
        with pytest.raises(helm.HelmValuesError) as caught:
            loaded.validate_schema(values)
        message = str(caught.value)
        # An install renders with the same check: it must fail the same way.
        with pytest.raises(helm.HelmValuesError) as at_render:
            loaded.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        assert "values don't meet the specifications of the schema" in str(at_render.value)
    return message


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the chart with its links intact, beside alerts/ and grafana/ folders that are
    links to the repository's, or placeholders where the repository has nothing yet."""
    root = tmp_path_factory.mktemp("chart-tree")
    chart = root / "helm" / "gpumem-exporter"
    shutil.copytree(CHART, chart, symlinks=True)

    alerts = root / "alerts"
    if ALERTS.is_dir() and rule_files(ALERTS):
        alerts.symlink_to(ALERTS, target_is_directory=True)
    else:
        warnings.warn("alerts/ has no rule file yet: testing with a placeholder rule file")
        alerts.mkdir()
        (alerts / "placeholder-rules.yaml").write_text(PLACEHOLDER_RULES)

    grafana = root / "grafana"
    if GRAFANA.is_dir() and dashboard_files(GRAFANA):
        grafana.symlink_to(GRAFANA, target_is_directory=True)
    else:
        warnings.warn("grafana/ has no dashboard yet: testing with a placeholder dashboard")
        grafana.mkdir()
        (grafana / "placeholder.json").write_text(json.dumps(PLACEHOLDER_DASHBOARD, indent=2) + "\n")

    return {"chart": chart, "alerts": alerts, "grafana": grafana}


@pytest.fixture(scope="session")
def chart(tree: dict[str, Path]) -> Path:
    return tree["chart"]


@pytest.fixture(scope="session")
def defaults(chart: Path) -> list[dict[str, Any]]:
    return manifests(chart)


@pytest.fixture(scope="session")
def everything(chart: Path) -> list[dict[str, Any]]:
    return manifests(chart, ALL_OPTIONS)


@pytest.fixture(scope="session")
def schema() -> dict[str, Any]:
    return json.loads((CHART / "values.schema.json").read_text())


@pytest.fixture(scope="session")
def default_values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


# --- the chart as it lies in the repository ------------------------------------------------


def test_chart_metadata() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "gpumem-exporter"
    assert meta["appVersion"] == "0.1.0"
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["version"])
    assert meta["kubeVersion"] == ">=1.25.0-0"


@pytest.mark.parametrize(
    ("link", "target", "folder"),
    [("files/alerts", "../../../alerts", ALERTS), ("files/dashboards", "../../../grafana", GRAFANA)],
)
def test_chart_links_to_the_repository_folders(link: str, target: str, folder: Path) -> None:
    path = CHART / link
    assert path.is_symlink(), f"{link} must be a link, not a copy"
    assert str(path.readlink()) == target
    assert path.resolve() == folder.resolve()
    assert folder.is_dir(), (
        f"{folder.name}/ is missing: the chart cannot load while {link} points nowhere"
    )


def test_repository_chart_loads_and_follows_the_links() -> None:
    """Helm follows links inside a chart directory: the chart carries the real files."""
    with helm.Chart.load(CHART) as loaded:
        names = {f["name"] for f in loaded.files}
    for path in rule_files(ALERTS):
        assert f"files/alerts/{path.name}" in names
    for path in dashboard_files(GRAFANA):
        assert f"files/dashboards/{path.name}" in names
    # .helmignore keeps promtool tests and notes out of the chart.
    assert not any(n.startswith("files/alerts/tests/") for n in names)
    assert not any(n.endswith(".md") and n.startswith("files/") for n in names)


def test_packaged_chart_holds_copies_not_links(tree: dict[str, Path], tmp_path: Path) -> None:
    archive = Path(helm.package(tree["chart"], destination=tmp_path))
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        for path in rule_files(tree["alerts"]):
            member = members[f"gpumem-exporter/files/alerts/{path.name}"]
            assert member.isfile()
            assert tar.extractfile(member).read() == path.read_bytes()
        for path in dashboard_files(tree["grafana"]):
            member = members[f"gpumem-exporter/files/dashboards/{path.name}"]
            assert member.isfile()
    assert not any(m.issym() for m in members.values())
    # The archive renders like the directory.
    with helm.Chart.load_archive(archive.read_bytes()) as loaded:
        out = loaded.render(ALL_OPTIONS, name=RELEASE, namespace=NAMESPACE, is_install=True)
    assert "kind: PrometheusRule" in out["gpumem-exporter/templates/prometheusrule.yaml"]


# --- lint ----------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, ALL_OPTIONS], ids=["defaults", "all-options"])
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_lint_is_clean(chart: Path, values: dict[str, Any] | None, kube_version: str) -> None:
    report = helm.lint(chart, values, strict=True, namespace=NAMESPACE, kube_version=f"v{kube_version}")
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []
    # The only remark allowed: no icon.
    infos = [m["error"] for m in report["messages"] if m["severity"] == 1]
    assert set(infos) <= {"icon is recommended"}


# --- rendered manifests --------------------------------------------------------------------


def test_default_render_kinds(defaults: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in defaults)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
        "Service",
        "ServiceAccount",
    ]
    for doc in defaults:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE
        assert doc["metadata"]["name"] == FULLNAME
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "gpumem-exporter"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/version"] == "0.1.0"


def test_pod_attribution_rbac(defaults: list[dict[str, Any]], chart: Path) -> None:
    role = one(defaults, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    binding = one(defaults, "ClusterRoleBinding")
    sa = one(defaults, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    ]
    off = manifests(chart, {"podAttribution": {"enabled": False}})
    assert not [d for d in off if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    pod = one(off, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "--kubernetes.attribution=off" in container(off)["args"]


def test_daemonset_defaults(defaults: list[dict[str, Any]]) -> None:
    ds = one(defaults, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = container(defaults)

    assert pod["hostPID"] is True
    assert "runtimeClassName" not in pod
    assert "priorityClassName" not in pod
    assert "imagePullSecrets" not in pod
    assert pod["serviceAccountName"] == one(defaults, "ServiceAccount")["metadata"]["name"]
    # Pod attribution (on by default) lists this node's pods with the service account token.
    assert pod["automountServiceAccountToken"] is True
    assert "--kubernetes.attribution=on" in c["args"]
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}

    # Scheduled on GPU nodes, tolerating their taint.
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]

    assert c["image"] == "gpumem-exporter:0.1.0"
    assert c["args"] == [
        "--source=nvml",
        "--web.listen-address=:10049",
        "--ingest.socket=/run/gpumem/ingest.sock",
        "--config=/etc/gpumem-exporter/config.yaml",
        "--log.level=info",
        "--log.format=logfmt",
        "--kubernetes.attribution=on",
    ]
    env = env_of(c)
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}

    assert c["ports"] == [{"name": "metrics", "containerPort": 10049, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/-/ready", "port": "metrics"}

    assert c["resources"] == {"requests": {"cpu": "10m", "memory": "24Mi"}, "limits": {"memory": "64Mi"}}

    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc
    assert pod["securityContext"]["runAsNonRoot"] is False
    assert "runAsUser" not in pod["securityContext"]

    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert volumes["ingest"]["hostPath"] == {"path": "/run/gpumem", "type": "DirectoryOrCreate"}
    assert mounts["ingest"]["mountPath"] == "/run/gpumem"
    assert volumes["config"]["configMap"]["name"] == one(defaults, "ConfigMap")["metadata"]["name"]
    assert mounts["config"] == {"name": "config", "mountPath": "/etc/gpumem-exporter", "readOnly": True}


def test_selectors_match(defaults: list[dict[str, Any]]) -> None:
    ds = one(defaults, "DaemonSet")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    for key, value in ds["spec"]["selector"]["matchLabels"].items():
        assert pod_labels[key] == value
    svc = one(defaults, "Service")
    for key, value in svc["spec"]["selector"].items():
        assert pod_labels[key] == value
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 10049, "targetPort": "metrics", "protocol": "TCP"}
    ]


def test_config_map_carries_the_config(chart: Path, everything: list[dict[str, Any]]) -> None:
    cm = next(d for d in by_kind(everything, "ConfigMap") if d["metadata"]["name"] == FULLNAME)
    assert yaml.safe_load(cm["data"]["config.yaml"]) == ALL_OPTIONS["config"]
    # A config change rolls the pods.
    a = one(manifests(chart), "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    b = one(everything, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert a["checksum/config"] != b["checksum/config"]


def test_all_options_render(everything: list[dict[str, Any]]) -> None:
    kinds = sorted({d["kind"] for d in everything})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
        "PrometheusRule",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ]
    ds = one(everything, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = container(everything)
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["nodeSelector"] == ALL_OPTIONS["nodeSelector"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["supplementalGroups"] == [44]
    assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
    meta = ds["spec"]["template"]["metadata"]
    assert meta["annotations"]["example.com/team"] == "ml-platform"
    assert meta["labels"]["team"] == "ml-platform"

    assert c["image"] == "registry.example.com/ml/gpumem-exporter:0.1.0-rc1"
    # The chart's arguments first, the extra ones after, in order.
    assert c["args"][:7] == [
        "--source=nvml",
        "--web.listen-address=:10049",
        "--ingest.socket=/run/gpumem/ingest.sock",
        "--config=/etc/gpumem-exporter/config.yaml",
        "--log.level=debug",
        "--log.format=json",
        "--kubernetes.attribution=on",
    ]
    assert c["args"][7:] == ALL_OPTIONS["extraArgs"]
    assert env_of(c)["RUST_BACKTRACE"]["value"] == "1"

    svc = one(everything, "Service")
    assert svc["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert svc["metadata"]["labels"]["tier"] == "monitoring"
    sa = one(everything, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"example.com/owner": "sre"}


def test_image_digest_wins_over_tag(chart: Path) -> None:
    digest = "sha256:" + "ab" * 32
    docs = manifests(chart, {"image": {"tag": "9.9.9", "digest": digest}})
    assert container(docs)["image"] == f"gpumem-exporter@{digest}"


def test_port_and_ingest_path_follow_values(chart: Path) -> None:
    docs = manifests(chart, {"port": 9400, "service": {"port": 80}, "ingest": {"hostPath": "/var/run/gpumem"}})
    c = container(docs)
    assert "--web.listen-address=:9400" in c["args"]
    assert c["ports"][0]["containerPort"] == 9400
    assert one(docs, "Service")["spec"]["ports"][0]["port"] == 80
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    ingest = next(v for v in pod["volumes"] if v["name"] == "ingest")
    assert ingest["hostPath"]["path"] == "/var/run/gpumem"
    # Inside the pod the socket stays where training pods expect it.
    assert "--ingest.socket=/run/gpumem/ingest.sock" in c["args"]


def test_host_pid_can_be_turned_off_with_a_warning(chart: Path) -> None:
    out = render(chart, {"hostPID": False})
    ds = yaml.safe_load(out["gpumem-exporter/templates/daemonset.yaml"])
    assert ds["spec"]["template"]["spec"]["hostPID"] is False
    assert "WARNING: hostPID is false" in out["gpumem-exporter/templates/NOTES.txt"]


def test_no_service_account_created(chart: Path) -> None:
    docs = manifests(chart, {"serviceAccount": {"create": False, "name": "existing"}})
    assert by_kind(docs, "ServiceAccount") == []
    assert one(docs, "DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"] == "existing"


def test_long_release_name_is_truncated(chart: Path) -> None:
    with helm.Chart.load(chart) as loaded:
        out = loaded.render({}, name="a" * 53, namespace=NAMESPACE, is_install=True)
    ds = yaml.safe_load(out["gpumem-exporter/templates/daemonset.yaml"])
    assert len(ds["metadata"]["name"]) <= 63


def test_notes_explain_metrics_and_socket(chart: Path) -> None:
    notes = render(chart)["gpumem-exporter/templates/NOTES.txt"]
    assert "port-forward" in notes and "10049" in notes and "/metrics" in notes
    assert "GPUMEM_INGEST_SOCKET" in notes and "/run/gpumem/ingest.sock" in notes
    assert "gpumem_client.start()" in notes


# --- Kubernetes validation -----------------------------------------------------------------


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", [None, ALL_OPTIONS], ids=["defaults", "all-options"])
def test_manifests_validate_strictly(chart: Path, values: dict[str, Any] | None, kube_version: str) -> None:
    checked = 0
    for doc in manifests(chart, values):
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # CRDs: see the tests below
        kubernetes_validate.validate(doc, kube_version, strict=True)
        checked += 1
    assert checked >= 4


RELABEL_KEYS = {
    "action",
    "sourceLabels",
    "separator",
    "targetLabel",
    "regex",
    "modulus",
    "replacement",
}
ENDPOINT_KEYS = {
    "port",
    "path",
    "scheme",
    "interval",
    "scrapeTimeout",
    "honorLabels",
    "relabelings",
    "metricRelabelings",
}
DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")


def check_metadata(doc: dict[str, Any]) -> None:
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    meta = doc["metadata"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", meta["name"]) and len(meta["name"]) <= 63
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", meta["namespace"])
    assert all(isinstance(v, str) for v in meta["labels"].values())


def test_service_monitor_structure(everything: list[dict[str, Any]]) -> None:
    sm = one(everything, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    check_metadata(sm)
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = sm["spec"]
    assert set(spec) == {"namespaceSelector", "selector", "endpoints"}
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}

    svc = one(everything, "Service")
    for key, value in spec["selector"]["matchLabels"].items():
        assert svc["metadata"]["labels"][key] == value
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= ENDPOINT_KEYS
    assert endpoint["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == "http"
    assert endpoint["interval"] == "30s" and DURATION.match(endpoint["interval"])
    assert endpoint["scrapeTimeout"] == "20s" and DURATION.match(endpoint["scrapeTimeout"])
    assert endpoint["honorLabels"] is False

    relabelings = endpoint["relabelings"]
    assert relabelings[0] == {
        "action": "replace",
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "instance",
    }
    assert relabelings[1:] == ALL_OPTIONS["serviceMonitor"]["relabelings"]
    assert endpoint["metricRelabelings"] == ALL_OPTIONS["serviceMonitor"]["metricRelabelings"]
    for r in relabelings + endpoint["metricRelabelings"]:
        assert set(r) <= RELABEL_KEYS
        assert all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", s) for s in r.get("sourceLabels", []))


def test_service_monitor_without_instance_relabeling(chart: Path) -> None:
    docs = manifests(chart, {"serviceMonitor": {"enabled": True, "instanceFromNodeName": False}})
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert "relabelings" not in endpoint
    assert one(docs, "ServiceMonitor")["metadata"]["namespace"] == NAMESPACE


def test_service_monitor_needs_the_service(chart: Path) -> None:
    with helm.Chart.load(chart) as loaded, pytest.raises(helm.HelmRenderError) as caught:
        loaded.render({"serviceMonitor": {"enabled": True}, "service": {"enabled": False}}, name=RELEASE)
    assert "serviceMonitor.enabled needs service.enabled=true" in str(caught.value)


def test_prometheus_rule_holds_exactly_the_rule_files(
    tree: dict[str, Path], everything: list[dict[str, Any]]
) -> None:
    pr = one(everything, "PrometheusRule")
    assert pr["apiVersion"] == "monitoring.coreos.com/v1"
    check_metadata(pr)
    assert pr["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert set(pr["spec"]) == {"groups"}

    files = rule_files(tree["alerts"])
    assert files, "no rule file to compare with"
    expected = []
    for path in files:
        expected.extend(yaml.safe_load(path.read_text())["groups"])
    assert pr["spec"]["groups"] == expected

    names = [g["name"] for g in pr["spec"]["groups"]]
    assert len(names) == len(set(names)), "group names must be unique"
    for group in pr["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit", "query_offset", "labels"}
        assert group["rules"]
        for rule in group["rules"]:
            assert ("record" in rule) != ("alert" in rule), rule
            assert isinstance(rule["expr"], (str, int, float)) and str(rule["expr"]).strip()
            allowed = {"record", "expr", "labels"} if "record" in rule else {
                "alert", "expr", "for", "keep_firing_for", "labels", "annotations"
            }
            assert set(rule) <= allowed, rule


def test_prometheus_rule_expected_files_are_there() -> None:
    """The two rule files the chart is documented to carry, once they are written."""
    present = {p.name for p in rule_files(ALERTS)} if ALERTS.is_dir() else set()
    missing = {"gpumem-rules.yaml", "gpumem-alerts.yaml"} - present
    if missing:
        pytest.skip(f"not in alerts/ yet: {', '.join(sorted(missing))}")


def test_prometheus_rule_namespace_option(chart: Path) -> None:
    docs = manifests(chart, {"prometheusRule": {"enabled": True, "namespace": "monitoring"}})
    assert one(docs, "PrometheusRule")["metadata"]["namespace"] == "monitoring"


def test_prometheus_rule_fails_clearly_without_rules(tmp_path: Path) -> None:
    chart = tmp_path / "helm" / "gpumem-exporter"
    shutil.copytree(CHART, chart, symlinks=True)
    (tmp_path / "alerts").mkdir()
    (tmp_path / "grafana").mkdir()
    with helm.Chart.load(chart) as loaded, pytest.raises(helm.HelmRenderError) as caught:
        loaded.render({"prometheusRule": {"enabled": True}}, name=RELEASE)
    assert "no rule groups found" in str(caught.value)
    with helm.Chart.load(chart) as loaded, pytest.raises(helm.HelmRenderError) as caught:
        loaded.render({"dashboards": {"enabled": True}}, name=RELEASE)
    assert "no dashboards found" in str(caught.value)


def test_dashboards_hold_exactly_the_grafana_files(
    tree: dict[str, Path], everything: list[dict[str, Any]]
) -> None:
    maps = [d for d in by_kind(everything, "ConfigMap") if d["metadata"]["name"] != FULLNAME]
    files = dashboard_files(tree["grafana"])
    assert files, "no dashboard to compare with"
    assert len(maps) == len(files)
    got = {}
    for cm in maps:
        assert cm["metadata"]["namespace"] == "grafana"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "GPU"}
        assert cm["metadata"]["name"].startswith(f"{FULLNAME}-dashboard-")
        assert len(cm["metadata"]["name"]) <= 253
        ((key, text),) = cm["data"].items()
        # Kubernetes stores at most 1 MiB per object.
        assert len(text.encode()) < 1024 * 1024 - 16 * 1024, f"{key} is too large for a ConfigMap"
        got[key] = text
    assert sorted(got) == [p.name for p in files]
    for path in files:
        assert json.loads(got[path.name]) == json.loads(path.read_text())
        assert got[path.name].strip() == path.read_text().strip()
    names = [cm["metadata"]["name"] for cm in maps]
    assert len(names) == len(set(names))


def test_dashboards_label_and_namespace_options(chart: Path) -> None:
    docs = manifests(chart, {"dashboards": {"enabled": True, "label": "grafana.example.com/dashboard", "labelValue": "gpu"}})
    maps = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] != FULLNAME]
    assert maps
    for cm in maps:
        assert cm["metadata"]["namespace"] == NAMESPACE
        assert cm["metadata"]["labels"]["grafana.example.com/dashboard"] == "gpu"
        assert "grafana_dashboard" not in cm["metadata"]["labels"]


# --- values schema -------------------------------------------------------------------------


@pytest.mark.parametrize("values", [{}, ALL_OPTIONS], ids=["defaults", "all-options"])
def test_schema_accepts_good_values(chart: Path, values: dict[str, Any]) -> None:
    with helm.Chart.load(chart) as loaded:
        loaded.validate_schema(values)


BAD_VALUES = [
    ({"hostPID": "yes"}, "/hostPID", "want boolean"),
    ({"bogus": 1}, "additional properties 'bogus' not allowed", ""),
    ({"port": -1}, "/port", "minimum"),
    ({"port": 70000}, "/port", "maximum"),
    ({"service": {"port": 0}}, "/service/port", "minimum"),
    ({"service": {"typo": True}}, "/service", "additional properties 'typo'"),
    ({"serviceMonitor": {"enabled": "true"}}, "/serviceMonitor/enabled", "want boolean"),
    ({"serviceMonitor": {"interval": "15 seconds"}}, "/serviceMonitor/interval", "does not match pattern"),
    ({"serviceMonitor": {"honourLabels": True}}, "/serviceMonitor", "additional properties 'honourLabels'"),
    ({"logLevel": "verbose"}, "/logLevel", "value must be one of"),
    ({"logFormat": "text"}, "/logFormat", "value must be one of"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy", "value must be one of"),
    ({"image": {"digest": "latest"}}, "/image/digest", "does not match pattern"),
    ({"extraArgs": ["source=sim"]}, "/extraArgs/0", "does not match pattern"),
    ({"extraArgs": "--log.level=debug"}, "/extraArgs", "want array"),
    ({"runtimeClassName": "NVIDIA_RT"}, "/runtimeClassName", "does not match pattern"),
    ({"updateStrategy": {"type": "Recreate"}}, "/updateStrategy/type", "value must be one of"),
    ({"supplementalGroups": [-1]}, "/supplementalGroups/0", "minimum"),
    ({"livenessProbe": {"periodSeconds": 0}}, "/livenessProbe/periodSeconds", "minimum"),
    ({"ingest": {"hostPath": "run/gpumem"}}, "/ingest/hostPath", "does not match pattern"),
    ({"dashboards": {"labelValue": "not a label"}}, "/dashboards/labelValue", "does not match pattern"),
    ({"prometheusRule": {"labels": {"release": 1}}}, "/prometheusRule/labels/release", "want string"),
    ({"config": "analysis: {}"}, "/config", "want object"),
]


@pytest.mark.parametrize(("values", "where", "what"), BAD_VALUES, ids=[w for _, w, _ in BAD_VALUES])
def test_schema_rejects_bad_values(chart: Path, values: dict[str, Any], where: str, what: str) -> None:
    message = schema_error(chart, values)
    assert where in message, message
    assert what in message, message


def test_schema_and_values_have_the_same_keys(schema: dict[str, Any], default_values: dict[str, Any]) -> None:
    def walk(node: dict[str, Any], values: dict[str, Any], prefix: str) -> None:
        assert node.get("additionalProperties") is False, f"{prefix or 'top level'} is not strict"
        props = node["properties"]
        for key, value in values.items():
            assert key in props, f"{prefix}{key} is in values.yaml but not in the schema"
            if isinstance(value, dict) and "properties" in props[key]:
                walk(props[key], value, f"{prefix}{key}.")
        for key in props:
            if key != "global":
                assert key in values, f"{prefix}{key} is in the schema but not in values.yaml"

    walk(schema, default_values, "")


def documented_keys(schema: dict[str, Any], values: dict[str, Any], prefix: str = "") -> list[str]:
    """Keys a user sets: nested where the chart defines the object, whole where it is free-form."""
    keys = []
    for key, value in values.items():
        node = schema["properties"][key]
        if isinstance(value, dict) and "properties" in node:
            keys.extend(documented_keys(node, value, f"{prefix}{key}."))
        else:
            keys.append(f"{prefix}{key}")
    return keys


def test_readme_documents_every_value(schema: dict[str, Any], default_values: dict[str, Any]) -> None:
    readme = (CHART / "README.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M)
    expected = documented_keys(schema, default_values)
    missing = [k for k in expected if k not in rows]
    assert missing == [], f"README.md does not document: {missing}"
    unknown = [k for k in rows if k not in expected]
    assert unknown == [], f"README.md documents keys the chart does not have: {unknown}"


# --- the example training pod --------------------------------------------------------------


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_example_training_pod(defaults: list[dict[str, Any]], kube_version: str) -> None:
    (pod,) = [d for d in yaml.safe_load_all((CHART / "examples" / "training-pod.yaml").read_text()) if d]
    kubernetes_validate.validate(pod, kube_version, strict=True)

    args = container(defaults)["args"]
    socket = next(a.split("=", 1)[1] for a in args if a.startswith("--ingest.socket="))
    exporter_pod = one(defaults, "DaemonSet")["spec"]["template"]["spec"]
    host_dir = next(v for v in exporter_pod["volumes"] if v["name"] == "ingest")["hostPath"]["path"]

    (trainer,) = pod["spec"]["containers"]
    assert env_of(trainer)["GPUMEM_INGEST_SOCKET"]["value"] == socket
    volume = next(v for v in pod["spec"]["volumes"] if "hostPath" in v)
    assert volume["hostPath"]["path"] == host_dir
    mount = next(m for m in trainer["volumeMounts"] if m["name"] == volume["name"])
    assert socket == f"{mount['mountPath']}/ingest.sock"
    script = " ".join(trainer.get("command", []) + trainer.get("args", []))
    # The client comes with the image, built from this repository: nothing is installed at
    # start, and never by name from a public index (the name is not ours there).
    assert "pip" not in script
    assert "import gpumem_client" in script and "gpumem_client.start()" in script
    assert mount.get("readOnly") is True, "the socket directory is mounted read-only"
    image_file = (REPO / "helm/gpumem-exporter/examples/training-image.Dockerfile").read_text()
    assert "--no-index" in image_file and "/usr/share/gpumem/python/" in image_file
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"pip wheel --no-deps .*\./clients/python", dockerfile)
    assert "/usr/share/gpumem/python/" in dockerfile.rsplit("FROM ", 1)[1]


# --- the image -----------------------------------------------------------------------------


def test_dockerfile_matches_the_chart(default_values: dict[str, Any]) -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM rust:1-bookworm AS builder$", text, flags=re.M)
    # The lean server: no charts, fonts or terminal UI in the image a cluster runs.
    assert "cargo build --release --locked --no-default-features" in text
    assert re.search(r"^FROM gcr\.io/distroless/cc-debian12$", text, flags=re.M)
    assert f"EXPOSE {default_values['port']}" in text
    assert 'ENTRYPOINT ["/usr/local/bin/gpumem-exporter"]' in text
    assert "/usr/local/bin/gpumem-exporter" in text.split("COPY --from=builder", 1)[1]
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in ("target", ".git", ".venv*"):
        assert entry in ignored
