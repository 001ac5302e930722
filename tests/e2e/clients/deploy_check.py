#!/usr/bin/env python3
"""Checks the production deployment files under deploy/ without a cluster or a Docker daemon.

    python3 tests/e2e/clients/deploy_check.py [--root REPO] [--k8s-version 1.30.0]

Parses every YAML file under deploy/k8s (multi-document) and every TOML file under deploy/, then
cross-checks them against each other and against the code: kustomizations reference files that
exist; Services, ServiceMonitors, PodDisruptionBudgets and the HorizontalPodAutoscaler select or
target real workloads and ports; probes use declared ports; pods pass the "restricted" Pod
Security rules and have requests and limits; the dashboards live alone in candor-monitoring with
their own ServiceAccount, read-only storage credentials and a NetworkPolicy that lets them reach
only Kafka, the object store, the webhook and DNS; Secrets are placeholders only and never part
of a kustomization; the PrometheusRule equals dashboards/prometheus/candor.rules.yml; the TOML
configs use only keys the Rust config structs declare; the containers' commands, flags and
CANDOR_* variables are ones the binaries declare; the Dockerfile builds and installs the three
binaries.

Optional tools make more checks run (each is SKIPPED, and says so, when missing):
  kubernetes-validate (PyPI)  strict schema validation of every built-in object
  kubectl                     `kubectl kustomize` renders the base and every overlay
  promtool                    `promtool check rules` on the PrometheusRule's groups

Prints one line per check and closes with "N passed, N failed[, N skipped]"; exits 1 on any failure.
Needs Python 3.11+ (tomllib) and PyYAML.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

DEFAULT_ROOT = Path(__file__).resolve().parents[3]

PIPELINE_NS = "candor"
MONITORING_NS = "candor-monitoring"
NAMESPACES = {PIPELINE_NS, MONITORING_NS}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
DASHBOARDS = "candor-dashboards"
NAME_LABEL = "app.kubernetes.io/name"

# The binaries the image must hold: (package, binary).
BINARIES = [
    ("candor-collector", "candor-collector"),
    ("candor-query", "candor"),
    ("candor-dashboards", "candor-dashboards"),
]
# Where each binary's clap arguments are declared.
CLI_SOURCES = {
    "candor-collector": "collector/src/main.rs",
    "candor-dashboards": "dashboards/src/main.rs",
    "candor": "query/src/main.rs",
}

# What the dashboards may reach (port, protocol) and how the destination must be selected.
DNS_PORTS = {(53, "UDP"), (53, "TCP")}
KAFKA_PORTS = {(9092, "TCP"), (9093, "TCP")}
OBJECT_STORE_PORTS = {(443, "TCP")}
WEBHOOK_PORTS = {(9093, "TCP")}
WEBHOOK_NAMESPACE = "monitoring"
DASHBOARDS_PORT = 3000

PLACEHOLDER = re.compile(r"REPLACE_ME|CHANGE_ME|<[^<>]+>")


# --------------------------------------------------------------------------------------------
# Loading


@dataclass
class Doc:
    path: Path
    index: int
    data: Any

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}#{self.index}"


@dataclass
class Generated:
    """A ConfigMap that a kustomization generates: its name, namespace and data."""

    name: str
    namespace: str | None
    data: dict[str, str]
    behavior: str
    kustomization: Path


@dataclass
class Repo:
    root: Path
    docs: list[Doc] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    kustomizations: dict[Path, dict] = field(default_factory=dict)

    @property
    def k8s(self) -> Path:
        return self.root / "deploy" / "k8s"

    def objects(self) -> list[Doc]:
        return [d for d in self.docs if isinstance(d.data, dict) and d.data.get("kind") != "Kustomization"]

    def deployed(self) -> list[Doc]:
        """Objects of the files the base kustomization (and the overlays) list as resources."""
        files = set()
        for kdir in self.kustomizations:
            for res in self.kustomizations[kdir].get("resources", []) or []:
                target = (kdir / res).resolve()
                if target.is_file():
                    files.add(target)
        return [d for d in self.objects() if d.path.resolve() in files]

    def generated(self) -> list[Generated]:
        out = []
        for kdir, k in self.kustomizations.items():
            for gen in k.get("configMapGenerator", []) or []:
                data: dict[str, str] = {}
                for literal in gen.get("literals", []) or []:
                    key, _, value = literal.partition("=")
                    data[key] = value
                for spec in gen.get("files", []) or []:
                    key, sep, rel = spec.partition("=")
                    if not sep:
                        key, rel = Path(spec).name, spec
                    file = kdir / rel
                    data[key] = file.read_text(encoding="utf-8") if file.is_file() else ""
                out.append(
                    Generated(gen.get("name", ""), gen.get("namespace"), data, gen.get("behavior", "create"), kdir)
                )
        return out


def load(root: Path) -> Repo:
    repo = Repo(root)
    for path in sorted(repo.k8s.rglob("*")):
        if path.suffix not in {".yaml", ".yml"} or not path.is_file():
            continue
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except yaml.YAMLError as err:
            repo.parse_errors.append(f"{path.relative_to(root)}: {err}".replace("\n", " "))
            continue
        for index, data in enumerate(docs):
            if data is None:
                continue
            repo.docs.append(Doc(path, index, data))
            if path.name in {"kustomization.yaml", "kustomization.yml"}:
                repo.kustomizations[path.parent] = data
    return repo


def meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def name_of(obj: dict) -> str:
    return f"{obj.get('kind')}/{meta(obj).get('namespace', '-')}/{meta(obj).get('name')}"


def pod_spec(obj: dict) -> dict | None:
    if obj.get("kind") in WORKLOAD_KINDS:
        return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return None


def template_labels(obj: dict) -> dict:
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}


def containers(spec: dict) -> list[dict]:
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def workloads(docs: Iterable[Doc]) -> list[dict]:
    return [d.data for d in docs if d.data.get("kind") in WORKLOAD_KINDS]


def subset(small: dict, big: dict) -> bool:
    return all(big.get(k) == v for k, v in small.items())


def selector_matches(selector: dict, labels: dict) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels."""
    if not subset(selector.get("matchLabels") or {}, labels):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def container_ports(obj: dict) -> list[dict]:
    spec = pod_spec(obj) or {}
    return [p for c in containers(spec) for p in (c.get("ports") or [])]


def port_declared(port: Any, ports: list[dict]) -> bool:
    if isinstance(port, str):
        return any(p.get("name") == port for p in ports)
    return any(p.get("containerPort") == port for p in ports)


def resolve_port(port: Any, ports: list[dict]) -> int | None:
    if isinstance(port, int):
        return port
    for p in ports:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


# --------------------------------------------------------------------------------------------
# Reading the code


def split_top_level(text: str) -> list[str]:
    """Splits Rust text at commas outside brackets, generics and string literals."""
    items, depth, buf, in_str, prev = [], 0, [], False, ""
    for ch in text:
        if in_str:
            in_str = not (ch == '"' and prev != "\\")
        elif ch == '"':
            in_str = True
        elif ch in "([{" or (ch == "<"):
            depth += 1
        elif ch in ")]}" or (ch == ">" and prev not in "-="):
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(buf))
            buf, prev = [], ch
            continue
        buf.append(ch)
        prev = ch
    items.append("".join(buf))
    return items


def rust_struct_fields(source: str, struct: str) -> list[tuple[str, str, str]]:
    """(field, type, attributes) of `struct NAME { ... }` in Rust source; attributes joined."""
    match = re.search(rf"\bstruct {struct}\s*\{{", source)
    if not match:
        return []
    body_start = match.end()
    depth, i = 1, body_start
    while depth and i < len(source):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        i += 1
    body = source[body_start : i - 1]
    # Comment lines go first (not `//` inside strings such as URLs).
    body = "\n".join(line for line in body.splitlines() if not line.strip().startswith("//"))
    fields = []
    for item in split_top_level(body):
        item = item.strip()
        attrs = []
        while item.startswith("#["):
            depth, j = 0, 1
            for j in range(1, len(item)):
                depth += {"[": 1, "]": -1}.get(item[j], 0)
                if depth == 0:
                    break
            attrs.append(item[2:j])
            item = item[j + 1 :].strip()
        m = re.fullmatch(r"(?:pub(?:\([^)]*\))?\s+)?(\w+)\s*:\s*(.+)", item, flags=re.S)
        if m:
            fields.append((m.group(1), " ".join(m.group(2).split()), " ".join(" ".join(attrs).split())))
    return fields


def clap_flags(source: str, struct: str) -> tuple[set[str], set[str]]:
    """The long flags and env variables of a clap Args struct (flattened structs included)."""
    flags, envs = set(), set()
    for name, ty, attrs in rust_struct_fields(source, struct):
        if "flatten" in attrs:
            more_flags, more_envs = clap_flags(source, ty)
            flags |= more_flags
            envs |= more_envs
            continue
        if not re.search(r"\barg\(", attrs):
            continue
        long = re.search(r'\blong\s*=\s*"([^"]+)"', attrs)
        if long:
            flags.add(long.group(1))
        elif re.search(r"\blong\b", attrs):
            flags.add(name.replace("_", "-"))
        env = re.search(r'\benv\s*=\s*"([^"]+)"', attrs)
        if env:
            envs.add(env.group(1))
    return flags, envs


def cli_of(root: Path, binary: str) -> dict[str | None, tuple[set[str], set[str]]]:
    """Subcommand (None for the top level) → (flags, env variables) of a binary."""
    source = (root / CLI_SOURCES[binary]).read_text(encoding="utf-8")
    out: dict[str | None, tuple[set[str], set[str]]] = {}
    top_flags, top_envs = clap_flags(source, "Cli")
    out[None] = (top_flags, top_envs)
    for enum in ("Role", "Command", "Commands"):
        m = re.search(rf"\benum {enum}\s*\{{(.*?)\n\}}", source, flags=re.S)
        if not m:
            continue
        for variant, args in re.findall(r"\b([A-Z]\w*)\((\w+)\)", m.group(1)):
            sub = re.sub(r"(?<!^)(?=[A-Z])", "-", variant).lower()
            flags, envs = clap_flags(source, args)
            out[sub] = (flags | top_flags, envs | top_envs)
    return out


def string_literals_in_fn(source: str, fn: str) -> set[str]:
    m = re.search(rf"\bfn {fn}\b.*?\n\}}", source, flags=re.S)
    if not m:
        return set()
    return {s for line in m.group(0).splitlines() if "=>" in line for s in re.findall(r'"([^"]+)"', line.split("=>")[0])}


# --------------------------------------------------------------------------------------------
# Checks. Each returns a list of problems (empty: passed) or raises Skip.


class Skip(Exception):
    pass


def check_yaml(repo: Repo) -> list[str]:
    problems = list(repo.parse_errors)
    files = {d.path for d in repo.docs}
    if not files:
        problems.append("no YAML found under deploy/k8s")
    return problems


def check_shape(repo: Repo) -> list[str]:
    problems = []
    for d in repo.docs:
        obj = d.data
        where = d.where(repo.root)
        if not isinstance(obj, dict):
            problems.append(f"{where}: not a mapping")
            continue
        if obj.get("kind") == "Kustomization":
            if obj.get("apiVersion") != "kustomize.config.k8s.io/v1beta1":
                problems.append(f"{where}: Kustomization with apiVersion {obj.get('apiVersion')!r}")
            continue
        for key in ("apiVersion", "kind"):
            if not obj.get(key):
                problems.append(f"{where}: no {key}")
        if not meta(obj).get("name"):
            problems.append(f"{where}: no metadata.name")
        namespace = meta(obj).get("namespace")
        if obj.get("kind") in CLUSTER_SCOPED:
            if namespace:
                problems.append(f"{where}: cluster-scoped {obj.get('kind')} with a namespace")
        elif namespace not in NAMESPACES:
            problems.append(f"{where}: namespace {namespace!r}, expected one of {sorted(NAMESPACES)}")
    return problems


def check_kustomizations(repo: Repo) -> list[str]:
    problems = []
    if repo.k8s / "base" not in repo.kustomizations:
        problems.append("deploy/k8s/base/kustomization.yaml missing")
    for kdir, k in repo.kustomizations.items():
        rel = kdir.relative_to(repo.root)
        listed = list(k.get("resources") or []) + list(k.get("components") or [])
        for res in listed:
            target = kdir / res
            if target.is_dir():
                if not any((target / n).is_file() for n in ("kustomization.yaml", "kustomization.yml")):
                    problems.append(f"{rel}: resource {res} is a directory without a kustomization")
            elif not target.is_file():
                problems.append(f"{rel}: resource {res} does not exist")
            else:
                kinds = [d.data.get("kind") for d in repo.docs if d.path.resolve() == target.resolve()]
                if "Secret" in kinds:
                    problems.append(f"{rel}: resource {res} holds a Secret; Secrets stay out of kustomizations")
        for patch in k.get("patches") or []:
            if isinstance(patch, dict) and patch.get("path") and not (kdir / patch["path"]).is_file():
                problems.append(f"{rel}: patch {patch['path']} does not exist")
        for gen in k.get("configMapGenerator") or []:
            for spec in gen.get("files") or []:
                file = spec.partition("=")[2] or spec
                if not (kdir / file).is_file():
                    problems.append(f"{rel}: configMapGenerator {gen.get('name')} file {file} does not exist")
            if gen.get("behavior") == "merge":
                bases = [g for g in repo.generated() if g.behavior != "merge"]
                if not any(g.name == gen.get("name") and g.namespace == gen.get("namespace") for g in bases):
                    problems.append(f"{rel}: merges into {gen.get('name')}, which no base generates")
        if k.get("secretGenerator"):
            problems.append(f"{rel}: secretGenerator: Secrets stay out of kustomizations")
    return problems


def check_schema(repo: Repo, version: str) -> tuple[list[str], str]:
    try:
        import kubernetes_validate  # type: ignore
    except ImportError:
        raise Skip("the kubernetes-validate package is not installed")
    problems, checked, custom = [], 0, set()
    for d in repo.objects():
        try:
            kubernetes_validate.validate(d.data, version, strict=True)
            checked += 1
        except kubernetes_validate.SchemaNotFoundError:
            custom.add(d.data.get("kind"))
        except kubernetes_validate.ValidationError as err:
            first = str(err).splitlines()[0]
            problems.append(f"{d.where(repo.root)} {name_of(d.data)}: {first}")
    return problems, f"{checked} objects valid against Kubernetes {version} (strict); no schema for {sorted(custom)}"


def check_workload_selectors(repo: Repo) -> list[str]:
    problems = []
    for obj in workloads(repo.deployed()):
        selector = (obj.get("spec") or {}).get("selector") or {}
        if not selector.get("matchLabels"):
            problems.append(f"{name_of(obj)}: no spec.selector.matchLabels")
        elif not selector_matches(selector, template_labels(obj)):
            problems.append(f"{name_of(obj)}: selector {selector.get('matchLabels')} does not match its template's labels")
    return problems


def selected_workloads(service: dict, docs: list[Doc]) -> list[dict]:
    selector = (service.get("spec") or {}).get("selector") or {}
    namespace = meta(service).get("namespace")
    return [
        w
        for w in workloads(docs)
        if meta(w).get("namespace") == namespace and selector and subset(selector, template_labels(w))
    ]


def services(docs: list[Doc]) -> list[dict]:
    return [d.data for d in docs if d.data.get("kind") == "Service"]


def check_service_selectors(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    if not services(docs):
        problems.append("no Service")
    for svc in services(docs):
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            problems.append(f"{name_of(svc)}: no selector")
        elif not selected_workloads(svc, docs):
            problems.append(f"{name_of(svc)}: selector {selector} matches no Deployment/StatefulSet template in its namespace")
    return problems


def check_service_ports(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    for svc in services(docs):
        chosen = selected_workloads(svc, docs)
        for port in (svc.get("spec") or {}).get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            protocol = port.get("protocol", "TCP")
            for w in chosen:
                ports = container_ports(w)
                match = [
                    p
                    for p in ports
                    if (p.get("name") == target if isinstance(target, str) else p.get("containerPort") == target)
                ]
                if not match:
                    problems.append(f"{name_of(svc)} port {port.get('name')}: targetPort {target!r} is not a container port of {name_of(w)}")
                elif any(p.get("protocol", "TCP") != protocol for p in match):
                    problems.append(f"{name_of(svc)} port {port.get('name')}: protocol differs from {name_of(w)}")
    return problems


def check_probes(repo: Repo) -> list[str]:
    problems = []
    expected_path = {"readinessProbe": "/readyz", "livenessProbe": "/healthz"}
    for obj in workloads(repo.deployed()):
        for c in containers(pod_spec(obj) or {}):
            ports = c.get("ports") or []
            for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
                probe = c.get(kind)
                if probe is None:
                    if kind != "startupProbe":
                        problems.append(f"{name_of(obj)}/{c.get('name')}: no {kind}")
                    continue
                action = probe.get("httpGet") or probe.get("tcpSocket") or probe.get("grpc")
                if not action:
                    problems.append(f"{name_of(obj)}/{c.get('name')}: {kind} has no httpGet/tcpSocket/grpc")
                    continue
                if not port_declared(action.get("port"), ports):
                    problems.append(f"{name_of(obj)}/{c.get('name')}: {kind} port {action.get('port')!r} is not a declared container port")
                path = (probe.get("httpGet") or {}).get("path")
                if kind in expected_path and path != expected_path[kind]:
                    problems.append(f"{name_of(obj)}/{c.get('name')}: {kind} path {path!r}, expected {expected_path[kind]}")
    return problems


def check_service_monitors(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    monitors = [d.data for d in docs if d.data.get("kind") == "ServiceMonitor"]
    for sm in monitors:
        namespace = meta(sm).get("namespace")
        spec = sm.get("spec") or {}
        matched = [
            s
            for s in services(docs)
            if meta(s).get("namespace") == namespace and selector_matches(spec.get("selector") or {}, meta(s).get("labels") or {})
        ]
        if not matched:
            problems.append(f"{name_of(sm)}: selects no Service in {namespace}")
            continue
        for ep in spec.get("endpoints") or []:
            names = {p.get("name") for s in matched for p in (s.get("spec") or {}).get("ports") or []}
            if ep.get("port") not in names:
                problems.append(f"{name_of(sm)}: endpoint port {ep.get('port')!r} is on none of {[meta(s).get('name') for s in matched]}")
    wanted = {"candor-collector", "candor-compactor", DASHBOARDS}
    scraped = {meta(s).get("labels", {}).get(NAME_LABEL) for s in monitors}
    if missing := wanted - scraped:
        problems.append(f"no ServiceMonitor for {sorted(missing)}")
    return problems


def check_hpa_pdb(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    all_workloads = workloads(docs)
    hpas = [d.data for d in docs if d.data.get("kind") == "HorizontalPodAutoscaler"]
    if not any((h.get("spec") or {}).get("scaleTargetRef", {}).get("name") == "candor-collector" for h in hpas):
        problems.append("no HorizontalPodAutoscaler for candor-collector")
    min_replicas: dict[tuple, int] = {}
    for hpa in hpas:
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        target = [
            w
            for w in all_workloads
            if w.get("kind") == ref.get("kind") and meta(w).get("name") == ref.get("name") and meta(w).get("namespace") == meta(hpa).get("namespace")
        ]
        if not target:
            problems.append(f"{name_of(hpa)}: scaleTargetRef {ref.get('kind')}/{ref.get('name')} does not exist")
            continue
        w = target[0]
        if "replicas" in (w.get("spec") or {}):
            problems.append(f"{name_of(w)}: sets spec.replicas although {name_of(hpa)} owns it")
        metrics = [m.get("resource", {}).get("name") for m in spec.get("metrics") or [] if m.get("type") == "Resource"]
        if "cpu" not in metrics:
            problems.append(f"{name_of(hpa)}: does not scale on CPU")
        for c in containers(pod_spec(w) or {}):
            if not ((c.get("resources") or {}).get("requests") or {}).get("cpu"):
                problems.append(f"{name_of(w)}/{c.get('name')}: no CPU request for the HPA to measure against")
        if spec.get("minReplicas", 1) > spec.get("maxReplicas", 0):
            problems.append(f"{name_of(hpa)}: minReplicas above maxReplicas")
        min_replicas[(meta(w).get("namespace"), meta(w).get("name"))] = spec.get("minReplicas", 1)
    for pdb in (d.data for d in docs if d.data.get("kind") == "PodDisruptionBudget"):
        selector = (pdb.get("spec") or {}).get("selector") or {}
        chosen = [w for w in all_workloads if meta(w).get("namespace") == meta(pdb).get("namespace") and selector_matches(selector, template_labels(w))]
        if not selector or not chosen:
            problems.append(f"{name_of(pdb)}: selects no workload")
            continue
        available = (pdb.get("spec") or {}).get("minAvailable")
        for w in chosen:
            replicas = min_replicas.get((meta(w).get("namespace"), meta(w).get("name")), (w.get("spec") or {}).get("replicas", 1))
            if isinstance(available, int) and available >= replicas:
                problems.append(f"{name_of(pdb)}: minAvailable {available} >= {replicas} replicas of {name_of(w)}: no voluntary eviction could ever proceed")
    return problems


def check_pod_security(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    accounts = {(meta(d.data).get("namespace"), meta(d.data).get("name")) for d in docs if d.data.get("kind") == "ServiceAccount"}
    for obj in workloads(docs):
        spec = pod_spec(obj) or {}
        who = name_of(obj)
        pod_sc = spec.get("securityContext") or {}
        if (pod_sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            problems.append(f"{who}: pod seccompProfile is not RuntimeDefault")
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key):
                problems.append(f"{who}: {key}")
        if any("hostPath" in v for v in spec.get("volumes") or []):
            problems.append(f"{who}: hostPath volume")
        account = spec.get("serviceAccountName")
        if not account or account == "default":
            problems.append(f"{who}: runs as the default ServiceAccount")
        elif (meta(obj).get("namespace"), account) not in accounts:
            problems.append(f"{who}: ServiceAccount {account} is not defined in its namespace")
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{who}: automountServiceAccountToken is not false")
        for c in containers(spec):
            cw = f"{who}/{c.get('name')}"
            sc = c.get("securityContext") or {}
            if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
                problems.append(f"{cw}: runAsNonRoot is not true")
            if (sc.get("runAsUser", pod_sc.get("runAsUser")) or 0) == 0:
                problems.append(f"{cw}: no non-zero runAsUser")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{cw}: readOnlyRootFilesystem is not true")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cw}: allowPrivilegeEscalation is not false")
            if sc.get("privileged"):
                problems.append(f"{cw}: privileged")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{cw}: capabilities do not drop ALL")
            if (sc.get("capabilities") or {}).get("add"):
                problems.append(f"{cw}: adds capabilities")
            res = c.get("resources") or {}
            for part, keys in (("requests", ("cpu", "memory")), ("limits", ("cpu", "memory"))):
                for key in keys:
                    if not (res.get(part) or {}).get(key):
                        problems.append(f"{cw}: no {part}.{key}")
    return problems


def env_secret_refs(c: dict) -> list[tuple[str, str | None]]:
    refs = []
    for e in c.get("env") or []:
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            refs.append((ref.get("name"), ref.get("key")))
    for e in c.get("envFrom") or []:
        if e.get("secretRef"):
            refs.append((e["secretRef"].get("name"), None))
    return refs


def secret_refs(obj: dict) -> list[tuple[str, str | None]]:
    spec = pod_spec(obj) or {}
    refs = [r for c in containers(spec) for r in env_secret_refs(c)]
    for v in spec.get("volumes") or []:
        if v.get("secret"):
            keys = [i.get("key") for i in v["secret"].get("items") or []] or [None]
            refs += [(v["secret"].get("secretName"), k) for k in keys]
    return refs


def check_dashboards_isolated(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    ours = [d.data for d in docs if (meta(d.data).get("labels") or {}).get(NAME_LABEL) == DASHBOARDS]
    for kind in ("Deployment", "Service", "ServiceAccount", "NetworkPolicy", "PrometheusRule", "ServiceMonitor"):
        if not any(o.get("kind") == kind for o in ours):
            problems.append(f"no {kind} labelled {NAME_LABEL}={DASHBOARDS}")
    for o in ours:
        if meta(o).get("namespace") != MONITORING_NS:
            problems.append(f"{name_of(o)}: the dashboards' objects belong in {MONITORING_NS}")
    for w in workloads(docs):
        is_dash = template_labels(w).get(NAME_LABEL) == DASHBOARDS
        if not is_dash and meta(w).get("namespace") == MONITORING_NS:
            problems.append(f"{name_of(w)}: a pipeline workload in {MONITORING_NS}")
    dash = [w for w in workloads(docs) if template_labels(w).get(NAME_LABEL) == DASHBOARDS]
    others = [w for w in workloads(docs) if template_labels(w).get(NAME_LABEL) != DASHBOARDS]
    other_accounts = {(meta(w).get("namespace"), (pod_spec(w) or {}).get("serviceAccountName")) for w in others}
    other_secrets = {name for w in others for name, _ in secret_refs(w)}
    for w in dash:
        spec = pod_spec(w) or {}
        if (meta(w).get("namespace"), spec.get("serviceAccountName")) in other_accounts:
            problems.append(f"{name_of(w)}: shares its ServiceAccount with the pipeline")
        refs = secret_refs(w)
        if shared := {n for n, _ in refs} & other_secrets:
            problems.append(f"{name_of(w)}: uses the pipeline's Secrets {sorted(shared)}")
        storage = [n for c in containers(spec) for e in c.get("env") or [] if e.get("name", "").startswith("AWS_") and (n := ((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name"))]
        if not storage:
            problems.append(f"{name_of(w)}: no storage credentials from a Secret")
        elif not all("readonly" in n or "read-only" in n for n in storage):
            problems.append(f"{name_of(w)}: storage credentials {sorted(set(storage))} are not the read-only ones")
        for c in containers(spec):
            for e in c.get("env") or []:
                if e.get("name") == "CANDOR_DASHBOARDS_GROUP" and e.get("value") == "candor-compactor":
                    problems.append(f"{name_of(w)}: uses the compactor's consumer group")
    return problems


def policy_ports(rule: dict) -> set[tuple[Any, str]]:
    return {(p.get("port"), p.get("protocol", "TCP")) for p in rule.get("ports") or []}


def check_dashboards_network_policy(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    dash = [w for w in workloads(docs) if template_labels(w).get(NAME_LABEL) == DASHBOARDS]
    policies = [
        d.data
        for d in docs
        if d.data.get("kind") == "NetworkPolicy"
        and meta(d.data).get("namespace") == MONITORING_NS
        and any(selector_matches((d.data.get("spec") or {}).get("podSelector") or {}, template_labels(w)) for w in dash)
    ]
    if not dash:
        return ["no dashboards workload"]
    if len(policies) != 1:
        return [f"expected exactly one NetworkPolicy selecting the dashboards in {MONITORING_NS}, found {len(policies)}"]
    spec = policies[0].get("spec") or {}
    who = name_of(policies[0])
    if set(spec.get("policyTypes") or []) != {"Ingress", "Egress"}:
        problems.append(f"{who}: policyTypes must be Ingress and Egress")
    ports_of_dash = [p for w in dash for p in container_ports(w)]
    ingress = spec.get("ingress") or []
    if not ingress:
        problems.append(f"{who}: no ingress rule: the UI and /metrics would be unreachable")
    for rule in ingress:
        resolved = {(resolve_port(p, ports_of_dash), proto) for p, proto in policy_ports(rule)}
        if resolved != {(DASHBOARDS_PORT, "TCP")}:
            problems.append(f"{who}: ingress rule allows {sorted(map(str, resolved))}, expected only {DASHBOARDS_PORT}/TCP")
    seen = set()
    for i, rule in enumerate(spec.get("egress") or []):
        ports = policy_ports(rule)
        peers = rule.get("to") or []
        if not ports:
            problems.append(f"{who}: egress rule {i} allows every port")
            continue
        if not peers:
            problems.append(f"{who}: egress rule {i} allows every destination")
            continue
        ns_names = {((p.get("namespaceSelector") or {}).get("matchLabels") or {}).get("kubernetes.io/metadata.name") for p in peers}
        ip_blocks = [p.get("ipBlock") for p in peers if p.get("ipBlock")]
        if ports <= DNS_PORTS:
            if ns_names != {"kube-system"} or ip_blocks:
                problems.append(f"{who}: DNS egress rule {i} is not limited to kube-system")
            seen.add("dns")
        elif ports <= OBJECT_STORE_PORTS:
            seen.add("object store")
            for block in ip_blocks:
                if block.get("cidr") == "0.0.0.0/0" and not {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} <= set(block.get("except") or []):
                    problems.append(f"{who}: object-store egress rule {i} reaches private addresses too")
        elif ports <= WEBHOOK_PORTS and ns_names == {WEBHOOK_NAMESPACE}:
            seen.add("webhook")
        elif ports <= KAFKA_PORTS:
            if not ns_names - {None} and not ip_blocks:
                problems.append(f"{who}: Kafka egress rule {i} names no destination")
            seen.add("kafka")
        else:
            problems.append(f"{who}: egress rule {i} allows {sorted(map(str, ports))}, outside Kafka 9092/9093, object store 443, webhook 9093 and DNS 53")
    for need in ("dns", "kafka", "object store", "webhook"):
        if need not in seen:
            problems.append(f"{who}: no egress rule for {need}")
    return problems


def secret_values(obj: dict) -> Iterable[tuple[str, str]]:
    for key, value in (obj.get("stringData") or {}).items():
        yield key, str(value)
    for key, value in (obj.get("data") or {}).items():
        try:
            yield key, base64.b64decode(str(value), validate=True).decode("utf-8", "replace")
        except ValueError:
            yield key, str(value)


def check_secrets(repo: Repo) -> tuple[list[str], str]:
    problems = []
    secrets = [d for d in repo.objects() if d.data.get("kind") == "Secret"]
    for d in secrets:
        for key, value in secret_values(d.data):
            if not PLACEHOLDER.search(value):
                problems.append(f"{d.where(repo.root)} {name_of(d.data)} key {key}: value does not look like a placeholder")
    for d in repo.deployed():
        if d.data.get("kind") == "Secret":
            problems.append(f"{name_of(d.data)}: a Secret among the resources a kustomization applies")
    return problems, f"{len(secrets)} example Secrets, every value a placeholder; none applied"


def check_secret_refs(repo: Repo) -> list[str]:
    problems = []
    examples = {
        (meta(d.data).get("namespace"), meta(d.data).get("name")): {k for k, _ in secret_values(d.data)}
        for d in repo.objects()
        if d.data.get("kind") == "Secret"
    }
    for w in workloads(repo.deployed()):
        ns = meta(w).get("namespace")
        for name, key in secret_refs(w):
            if (ns, name) not in examples:
                problems.append(f"{name_of(w)}: Secret {ns}/{name} is not described in a *.example.yaml")
            elif key is not None and key not in examples[(ns, name)]:
                problems.append(f"{name_of(w)}: Secret {ns}/{name} has no key {key} in its example")
    return problems


def configmaps(repo: Repo) -> dict[tuple, dict[str, str]]:
    """(namespace, name) → data, of ConfigMap resources and generators (merges applied)."""
    out: dict[tuple, dict[str, str]] = {}
    for d in repo.deployed():
        if d.data.get("kind") == "ConfigMap":
            out[(meta(d.data).get("namespace"), meta(d.data).get("name"))] = dict(d.data.get("data") or {})
    gens = repo.generated()
    for g in sorted(gens, key=lambda g: g.behavior == "merge"):
        key = (g.namespace, g.name)
        if g.behavior == "merge":
            out.setdefault(key, {}).update(g.data)
        else:
            out[key] = dict(g.data)
    return out


def check_configmap_refs(repo: Repo) -> list[str]:
    problems = []
    maps = configmaps(repo)
    for w in workloads(repo.deployed()):
        ns = meta(w).get("namespace")
        spec = pod_spec(w) or {}
        for c in containers(spec):
            for e in c.get("env") or []:
                ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                if not ref:
                    continue
                data = maps.get((ns, ref.get("name")))
                if data is None:
                    problems.append(f"{name_of(w)}: ConfigMap {ns}/{ref.get('name')} is neither a resource nor generated")
                elif ref.get("key") not in data:
                    problems.append(f"{name_of(w)}: ConfigMap {ns}/{ref.get('name')} has no key {ref.get('key')}")
                elif not str(data[ref.get("key")]).strip() and not ref.get("optional"):
                    problems.append(f"{name_of(w)}: {ns}/{ref.get('name')} key {ref.get('key')} is empty (the binaries take an empty variable as a value)")
        for v in spec.get("volumes") or []:
            if v.get("configMap") and (ns, v["configMap"].get("name")) not in maps:
                problems.append(f"{name_of(w)}: volume ConfigMap {ns}/{v['configMap'].get('name')} is neither a resource nor generated")
    return problems


def mount_for(c: dict, spec: dict, path: str) -> tuple[dict, dict] | None:
    """The (volumeMount, volume) a file path lies under, deepest mount first."""
    best = None
    for m in c.get("volumeMounts") or []:
        mp = m.get("mountPath", "").rstrip("/")
        if path.startswith(mp + "/") and (best is None or len(mp) > len(best.get("mountPath", ""))):
            best = m
    if best is None:
        return None
    volume = next((v for v in spec.get("volumes") or [] if v.get("name") == best.get("name")), None)
    return (best, volume) if volume else None


def config_arg(c: dict) -> str | None:
    args = list(c.get("args") or [])
    for i, a in enumerate(args):
        if a == "--config" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def check_config_mounts(repo: Repo) -> list[str]:
    problems = []
    maps = configmaps(repo)
    examples = {
        (meta(d.data).get("namespace"), meta(d.data).get("name")): {k for k, _ in secret_values(d.data)}
        for d in repo.objects()
        if d.data.get("kind") == "Secret"
    }
    for w in workloads(repo.deployed()):
        ns = meta(w).get("namespace")
        spec = pod_spec(w) or {}
        for c in containers(spec):
            path = config_arg(c)
            if path is None:
                continue
            who = f"{name_of(w)}/{c.get('name')}"
            found = mount_for(c, spec, path)
            if not found or not found[1].get("configMap"):
                problems.append(f"{who}: --config {path} is not under a ConfigMap mount")
                continue
            data = maps.get((ns, found[1]["configMap"].get("name")), {})
            key = path[len(found[0]["mountPath"].rstrip("/")) + 1 :]
            if key not in data:
                problems.append(f"{who}: ConfigMap {found[1]['configMap'].get('name')} has no key {key}")
                continue
            try:
                config = tomllib.loads(data[key])
            except tomllib.TOMLDecodeError as err:
                problems.append(f"{who}: {key} is not TOML: {err}")
                continue
            env_names = {e.get("name") for e in c.get("env") or []}
            otlp, kafka = config.get("otlp") or {}, config.get("kafka") or {}
            needed_env = [otlp.get("auth_token_env")] + list((kafka.get("extra_env") or {}).values())
            for var in filter(None, needed_env):
                if var not in env_names:
                    problems.append(f"{who}: {key} names the variable {var}, which the container does not set")
            files = [otlp.get("tls_cert_path"), otlp.get("tls_key_path")]
            files += [v for k, v in (kafka.get("extra") or {}).items() if k.endswith(".location")]
            for file in filter(None, files):
                mounted = mount_for(c, spec, file)
                if not mounted:
                    problems.append(f"{who}: {key} reads {file}, which no volume provides")
                    continue
                secret = mounted[1].get("secret")
                rel = file[len(mounted[0]["mountPath"].rstrip("/")) + 1 :]
                if secret and (ns, secret.get("secretName")) in examples and rel not in examples[(ns, secret.get("secretName"))]:
                    problems.append(f"{who}: {file} needs key {rel} in Secret {secret.get('secretName')}")
    return problems


def dockerfile_stages(text: str) -> tuple[dict[str, str], list[dict]]:
    """ARG defaults before the first FROM, and each stage's instructions (continuations joined)."""
    logical, buf = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        buf += " " + stripped.rstrip("\\").strip() if buf else stripped.rstrip("\\").strip()
        if not stripped.endswith("\\"):
            logical.append(buf)
            buf = ""
    args: dict[str, str] = {}
    stages: list[dict] = []
    for inst in logical:
        op, _, rest = inst.partition(" ")
        op = op.upper()
        if op == "ARG" and not stages:
            k, _, v = rest.partition("=")
            args[k.strip()] = v.strip()
        elif op == "FROM":
            parts = rest.split()
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), parts[0])
            alias = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append({"image": image, "alias": alias, "inst": []})
        elif stages:
            stages[-1]["inst"].append((op, rest))
    return args, stages


def cargo_package(root: Path, package: str) -> Path | None:
    for manifest in root.glob("*/Cargo.toml"):
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        if (data.get("package") or {}).get("name") == package:
            return manifest
    return None


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pat = raw[1:] if negate else raw
        pat = pat.strip().strip("/").replace("**/", "*").replace("/**", "*")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(p, pat) for p in prefixes):
            excluded = not negate
    return excluded


def check_dockerfile(repo: Repo) -> tuple[list[str], str]:
    problems = []
    dockerfile = repo.root / "deploy/docker/Dockerfile"
    if not dockerfile.is_file():
        return ["deploy/docker/Dockerfile missing"], ""
    _, stages = dockerfile_stages(dockerfile.read_text(encoding="utf-8"))
    if len(stages) < 2:
        return [f"expected a multi-stage build, found {len(stages)} stage(s)"], ""
    builder, runtime = stages[0], stages[-1]
    if not re.fullmatch(r"rust:[\w.]+-bookworm", builder["image"]):
        problems.append(f"builder image {builder['image']!r} is not rust:<version>-bookworm")
    if runtime["image"] != "debian:bookworm-slim":
        problems.append(f"runtime image {runtime['image']!r} is not debian:bookworm-slim")
    builds = [rest for op, rest in builder["inst"] if op == "RUN" and "cargo build" in rest]
    if len(builds) != 1:
        problems.append(f"expected one `cargo build` in the builder stage, found {len(builds)}")
    else:
        cmd = builds[0].split("cargo build", 1)[1].split("&&")[0].split()
        for flag in ("--release", "--locked"):
            if flag not in cmd:
                problems.append(f"cargo build without {flag}")
        packages = {cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "-p"}
        bins = {cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--bin"}
        for package, binary in BINARIES:
            if package not in packages:
                problems.append(f"cargo build does not name -p {package}")
            if binary not in bins:
                problems.append(f"cargo build does not name --bin {binary}")
            manifest = cargo_package(repo.root, package)
            if manifest is None:
                problems.append(f"no crate named {package} in the workspace")
                continue
            declared = {b.get("name") for b in tomllib.loads(manifest.read_text(encoding="utf-8")).get("bin") or []}
            if binary not in declared:
                problems.append(f"{manifest.relative_to(repo.root)} declares no binary {binary}")
    runtime_text = " ".join(rest for _, rest in runtime["inst"])
    for package, binary in BINARIES:
        if not re.search(rf"COPY --from={re.escape(builder['alias'] or '0')} \S*{re.escape(binary)} /usr/local/bin/{re.escape(binary)}\b", " ".join(f"{op} {rest}" for op, rest in runtime["inst"])):
            problems.append(f"the runtime stage does not copy {binary} into /usr/local/bin")
    if "ca-certificates" not in runtime_text:
        problems.append("the runtime stage does not install ca-certificates")
    users = [rest.split(":")[0] for op, rest in runtime["inst"] if op == "USER"]
    if not users or not users[-1].isdigit() or users[-1] == "0":
        problems.append(f"the runtime stage's USER {users[-1] if users else None!r} is not a numeric non-root user")
    else:
        for w in workloads(repo.deployed()):
            uid = ((pod_spec(w) or {}).get("securityContext") or {}).get("runAsUser")
            if uid is not None and str(uid) != users[-1]:
                problems.append(f"{name_of(w)}: runAsUser {uid} differs from the image's USER {users[-1]}")
    if any(op == "ENTRYPOINT" for op, _ in runtime["inst"]):
        problems.append("the image has an ENTRYPOINT; each workload chooses its binary with `command`")
    # The build context: the Dockerfile-specific ignore file.
    ignore = repo.root / "deploy/docker/Dockerfile.dockerignore"
    if not ignore.is_file():
        problems.append("deploy/docker/Dockerfile.dockerignore missing")
    else:
        patterns = [l.strip() for l in ignore.read_text(encoding="utf-8").splitlines() if l.strip() and not l.startswith("#")]
        members = tomllib.loads((repo.root / "Cargo.toml").read_text(encoding="utf-8"))["workspace"]["members"]
        needed = ["Cargo.toml", "Cargo.lock", "deploy/collector.example.toml", "deploy/compactor.example.toml"]
        needed += [f"{m}/Cargo.toml" for m in members] + [f"{m}/src" for m in members if (repo.root / m / "src").is_dir()]
        for path in needed:
            if dockerignore_excludes(patterns, path):
                problems.append(f"Dockerfile.dockerignore excludes {path}, which the build needs")
        for path in ("target/release", ".git/HEAD", "data/tables"):
            if not dockerignore_excludes(patterns, path):
                problems.append(f"Dockerfile.dockerignore lets {path} into the context")
    binaries = ", ".join(b for _, b in BINARIES)
    return problems, f"{builder['image']} builds {binaries}; {runtime['image']} runs them as UID {users[-1] if users else '?'}"


def check_commands(repo: Repo) -> list[str]:
    problems = []
    maps = configmaps(repo)
    clis = {b: cli_of(repo.root, b) for b in CLI_SOURCES}
    for w in workloads(repo.deployed()):
        ns = meta(w).get("namespace")
        spec = pod_spec(w) or {}
        for c in containers(spec):
            who = f"{name_of(w)}/{c.get('name')}"
            command = c.get("command") or []
            if not command:
                problems.append(f"{who}: no command (the image has no entrypoint)")
                continue
            binary = command[0]
            if binary not in clis:
                problems.append(f"{who}: command {binary!r} is not one of the image's binaries {sorted(clis)}")
                continue
            args = list(command[1:]) + list(c.get("args") or [])
            cli = clis[binary]
            sub = None
            if args and not args[0].startswith("-"):
                sub = args[0]
                if sub not in cli:
                    problems.append(f"{who}: {binary} has no subcommand {sub!r} (has {sorted(k for k in cli if k)})")
                    continue
            elif any(k for k in cli) and None not in cli:
                problems.append(f"{who}: {binary} needs a subcommand")
                continue
            flags, envs = cli[sub]
            for a in args:
                if a.startswith("--"):
                    flag = a[2:].split("=", 1)[0]
                    if flag not in flags and flag not in {"help", "version"}:
                        problems.append(f"{who}: {binary} {sub or ''} declares no flag --{flag}")
            # Variables the config file names count as declared too.
            named = set()
            path = config_arg(c)
            found = mount_for(c, spec, path) if path else None
            if found and found[1].get("configMap"):
                text = maps.get((ns, found[1]["configMap"].get("name")), {}).get(path[len(found[0]["mountPath"].rstrip("/")) + 1 :], "")
                try:
                    config = tomllib.loads(text)
                except tomllib.TOMLDecodeError:
                    config = {}
                named.add((config.get("otlp") or {}).get("auth_token_env"))
                named |= set(((config.get("kafka") or {}).get("extra_env") or {}).values())
            for e in c.get("env") or []:
                var = e.get("name", "")
                if var.startswith("CANDOR_") and var not in envs | named:
                    problems.append(f"{who}: {binary} {sub or ''} reads no variable {var}")
    return problems


def check_toml_parse(repo: Repo) -> tuple[list[str], str]:
    problems, count = [], 0
    for path in sorted((repo.root / "deploy").rglob("*.toml")):
        count += 1
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as err:
            problems.append(f"{path.relative_to(repo.root)}: {err}")
    if count == 0:
        problems.append("no TOML under deploy/")
    return problems, f"{count} files"


def rust_schema(source: str, struct: str) -> dict:
    """A Raw* config struct as {key: type or nested schema}."""
    out: dict[str, Any] = {}
    for name, ty, _ in rust_struct_fields(source, struct):
        inner = re.sub(r"^Option<(.*)>$", r"\1", ty)
        out[name] = rust_schema(source, inner) if inner.startswith("Raw") else inner
    return out


def type_ok(ty: str, value: Any) -> bool:
    if ty in {"String"}:
        return isinstance(value, str)
    if ty in {"i64", "u64", "i32", "u32", "usize"}:
        return isinstance(value, int) and not isinstance(value, bool)
    if ty == "bool":
        return isinstance(value, bool)
    if ty.startswith("BTreeMap<String, String>"):
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return True


def schema_problems(schema: dict, data: dict, prefix: str = "") -> list[str]:
    problems = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in schema:
            problems.append(f"unknown key {dotted} (the code refuses it: deny_unknown_fields)")
        elif isinstance(schema[key], dict):
            if not isinstance(value, dict):
                problems.append(f"{dotted} is not a table")
            else:
                problems += schema_problems(schema[key], value, dotted + ".")
        elif not type_ok(schema[key], value):
            problems.append(f"{dotted} = {value!r} is not of the code's type {schema[key]}")
    return problems


def check_toml_keys(repo: Repo) -> tuple[list[str], str]:
    """Every key of every collector/compactor TOML under deploy/ is declared by the Rust structs,
    with a value of the declared type; kafka.extra holds no setting the code reserves or refuses."""
    problems = []
    collector_src = (repo.root / "collector/src/config.rs").read_text(encoding="utf-8")
    compactor_src = (repo.root / "collector/src/compact/config.rs").read_text(encoding="utf-8")
    kinds = {
        "collector": (rust_schema(collector_src, "RawConfig"), string_literals_in_fn(collector_src, "reserved_kafka_setting")),
        "compactor": (rust_schema(compactor_src, "RawCompactConfig"), string_literals_in_fn(compactor_src, "reserved_setting")),
    }
    for kind, (schema, reserved) in kinds.items():
        if len(schema) < 4 or not reserved:
            problems.append(f"could not read the {kind}'s config structs from the Rust source")
    checked = 0
    for path in sorted((repo.root / "deploy").rglob("*.toml")):
        kind = "compactor" if "compactor" in path.name else "collector" if "collector" in path.name else None
        if kind is None:
            continue
        checked += 1
        rel = path.relative_to(repo.root)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError:
            continue  # reported by the parse check
        schema, reserved = kinds[kind]
        problems += [f"{rel}: {p}" for p in schema_problems(schema, data)]
        kafka = data.get("kafka") or {}
        for setting in list((kafka.get("extra") or {})) + list((kafka.get("extra_env") or {})):
            if setting in reserved:
                problems.append(f"{rel}: kafka setting {setting!r} is reserved by the code")
        for setting in kafka.get("extra") or {}:
            if setting.endswith("password") or "secret" in setting or setting == "ssl.key.pem":
                problems.append(f"{rel}: kafka.extra.{setting!r} is a secret: the code wants it in kafka.extra_env")
        for var in list((kafka.get("extra_env") or {}).values()) + [((data.get("otlp") or {}).get("auth_token_env"))]:
            if var is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                problems.append(f"{rel}: {var!r} is not an environment variable name")
    return problems, f"{checked} files against RawConfig / RawCompactConfig"


def check_config_copies(repo: Repo) -> list[str]:
    problems = []
    pairs = [
        ("deploy/config/collector.kafka-sasl-tls.toml", "deploy/k8s/base/files/collector.toml"),
        ("deploy/config/compactor.s3.toml", "deploy/k8s/base/files/compactor.toml"),
    ]
    for source, copy in pairs:
        a, b = repo.root / source, repo.root / copy
        if not a.is_file() or not b.is_file():
            problems.append(f"{source} or {copy} missing")
        elif a.read_bytes() != b.read_bytes():
            problems.append(f"{copy} differs from {source}: cp {source} {copy}")
    return problems


def generator(repo: Repo):
    # Imported from its path; no __pycache__ is left in the tree.
    sys.dont_write_bytecode = True
    path = repo.root / "deploy/k8s/gen_prometheusrule.py"
    spec = importlib.util.spec_from_file_location("gen_prometheusrule", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_prometheus_rule(repo: Repo) -> tuple[list[str], str]:
    problems = []
    gen = generator(repo)
    source = (repo.root / gen.SOURCE).read_text(encoding="utf-8")
    committed_path = repo.root / gen.OUTPUT
    committed = committed_path.read_text(encoding="utf-8")
    if committed != gen.render(source):
        problems.append(f"{gen.OUTPUT} is stale: run python3 deploy/k8s/gen_prometheusrule.py")
    rule = yaml.safe_load(committed)
    if rule.get("apiVersion") != "monitoring.coreos.com/v1" or rule.get("kind") != "PrometheusRule":
        problems.append(f"{gen.OUTPUT} is not a monitoring.coreos.com/v1 PrometheusRule")
    groups = (rule.get("spec") or {}).get("groups")
    if groups != yaml.safe_load(source)["groups"]:
        problems.append(f"the PrometheusRule's groups differ from {gen.SOURCE}")
    base = repo.kustomizations.get(repo.k8s / "base") or {}
    if "prometheusrule.yaml" not in (base.get("resources") or []):
        problems.append("base/kustomization.yaml does not list prometheusrule.yaml")
    rules = sum(len(g.get("rules") or []) for g in groups or [])
    return problems, f"{len(groups or [])} groups, {rules} rules, equal to {gen.SOURCE}"


def check_promtool(repo: Repo) -> tuple[list[str], str]:
    promtool = shutil.which("promtool")
    if not promtool:
        raise Skip("promtool not found")
    rule = yaml.safe_load((repo.root / "deploy/k8s/base/prometheusrule.yaml").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prometheusrule-groups.yml"
        path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False), encoding="utf-8")
        run = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    if run.returncode != 0:
        return [(run.stdout + run.stderr).strip().replace("\n", " | ")], ""
    return [], (run.stdout.strip().splitlines() or [""])[-1].strip()


def check_kustomize(repo: Repo, version: str) -> tuple[list[str], str]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise Skip("kubectl not found")
    try:
        import kubernetes_validate  # type: ignore
    except ImportError:
        kubernetes_validate = None
    problems, notes = [], []
    base_kafka: dict | None = None
    # The base sorts before the overlays: its placeholder bootstrap is known when they are read.
    for kdir in sorted(repo.kustomizations):
        rel = kdir.relative_to(repo.root)
        run = subprocess.run([kubectl, "kustomize", str(kdir)], capture_output=True, text=True)
        if run.returncode != 0:
            err = re.search(r'err="(.*)"', run.stderr)
            problems.append(f"{rel}: kubectl kustomize failed: {err.group(1) if err else run.stderr.strip() or run.returncode}")
            continue
        objs = [o for o in yaml.safe_load_all(run.stdout) if o]
        notes.append(f"{rel}: {len(objs)} objects")
        kafka = {
            k: v
            for o in objs
            if o.get("kind") == "ConfigMap"
            for k, v in [((meta(o).get("namespace"), meta(o).get("name", "").rsplit("-", 1)[0]), (o.get("data") or {}).get("kafka-brokers"))]
            if v is not None
        }
        if "overlays" not in rel.parts:
            base_kafka = kafka
        elif kafka and kafka == base_kafka:
            problems.append(f"{rel}: keeps the base's placeholder Kafka bootstrap")
        if any(o.get("kind") == "Secret" for o in objs):
            problems.append(f"{rel}: renders a Secret")
        cms = {(meta(o).get("namespace"), meta(o).get("name")): o.get("data") or {} for o in objs if o.get("kind") == "ConfigMap"}
        for w in (o for o in objs if o.get("kind") in WORKLOAD_KINDS):
            ns = meta(w).get("namespace")
            for c in containers(pod_spec(w) or {}):
                if "overlays" in rel.parts and c.get("image", "").split(":")[0] == "candor":
                    problems.append(f"{rel}: {name_of(w)} still uses the placeholder image {c.get('image')!r}")
                for e in c.get("env") or []:
                    ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                    if ref and ref.get("key") not in cms.get((ns, ref.get("name")), {}):
                        problems.append(f"{rel}: {name_of(w)} env {e.get('name')}: rendered ConfigMap {ref.get('name')} has no key {ref.get('key')}")
                    if ref and e.get("name", "").endswith(("KAFKA_BROKERS", "CANDOR_KAFKA")):
                        value = cms.get((ns, ref.get("name")), {}).get(ref.get("key"), "")
                        if not all(re.fullmatch(r"[\w.\-\[\]:]+:\d+", b.strip()) for b in value.split(",")):
                            problems.append(f"{rel}: {name_of(w)} {e.get('name')} = {value!r} is not a host:port list")
            for v in (pod_spec(w) or {}).get("volumes") or []:
                if v.get("configMap") and (ns, v["configMap"].get("name")) not in cms:
                    problems.append(f"{rel}: {name_of(w)} volume {v.get('name')}: rendered ConfigMap {v['configMap'].get('name')} missing")
        if kubernetes_validate is not None:
            for o in objs:
                try:
                    kubernetes_validate.validate(o, version, strict=True)
                except kubernetes_validate.SchemaNotFoundError:
                    pass
                except kubernetes_validate.ValidationError as err:
                    problems.append(f"{rel}: rendered {name_of(o)}: {str(err).splitlines()[0]}")
    return problems, "; ".join(notes)


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="repository root")
    parser.add_argument("--k8s-version", default="1.30.0", help="Kubernetes version of the schemas")
    args = parser.parse_args()
    root = args.root.resolve()
    repo = load(root)

    checks: list[tuple[str, Callable[[], Any]]] = [
        ("every YAML under deploy/k8s parses", lambda: check_yaml(repo)),
        ("every object has apiVersion, kind, metadata.name and a Candor namespace", lambda: check_shape(repo)),
        ("every kustomization's resources, patches and generator files exist; no Secret in them", lambda: check_kustomizations(repo)),
        ("built-in objects match the Kubernetes schema", lambda: check_schema(repo, args.k8s_version)),
        ("workload selectors match their pod templates", lambda: check_workload_selectors(repo)),
        ("every Service selects a Deployment/StatefulSet template", lambda: check_service_selectors(repo)),
        ("every Service targetPort is a container port", lambda: check_service_ports(repo)),
        ("probes use declared ports, readiness /readyz, liveness /healthz", lambda: check_probes(repo)),
        ("ServiceMonitors select Services and ports; collector, compactor and dashboards scraped", lambda: check_service_monitors(repo)),
        ("HPA and PodDisruptionBudgets target real workloads", lambda: check_hpa_pdb(repo)),
        ("pods are restricted (non-root, read-only root, no caps) with requests and limits", lambda: check_pod_security(repo)),
        ("dashboards alone in candor-monitoring, own ServiceAccount, read-only storage Secret", lambda: check_dashboards_isolated(repo)),
        ("dashboards NetworkPolicy: ingress 3000 only; egress only Kafka, object store, webhook, DNS", lambda: check_dashboards_network_policy(repo)),
        ("Secrets hold placeholders only and are never applied", lambda: check_secrets(repo)),
        ("every referenced Secret and key is described in secrets.example.yaml", lambda: check_secret_refs(repo)),
        ("every referenced ConfigMap and key exists, values non-empty", lambda: check_configmap_refs(repo)),
        ("--config files are mounted; their TLS/CA files and variables are provided", lambda: check_config_mounts(repo)),
        ("container commands, flags and CANDOR_* variables are declared by the binaries", lambda: check_commands(repo)),
        ("the Dockerfile builds and installs candor-collector, candor, candor-dashboards", lambda: check_dockerfile(repo)),
        ("every TOML under deploy/ parses", lambda: check_toml_parse(repo)),
        ("TOML keys and types are those the Rust config structs declare", lambda: check_toml_keys(repo)),
        ("deploy/config/*.toml equal the kustomize base's copies", lambda: check_config_copies(repo)),
        ("the PrometheusRule equals dashboards/prometheus/candor.rules.yml, regenerated", lambda: check_prometheus_rule(repo)),
        ("promtool check rules accepts the PrometheusRule's groups", lambda: check_promtool(repo)),
        ("kubectl kustomize renders base and overlays; overlay sets image and Kafka", lambda: check_kustomize(repo, args.k8s_version)),
    ]
    passed = failed = skipped = 0
    for title, run in checks:
        try:
            result = run()
        except Skip as skip:
            skipped += 1
            print(f"SKIP {title}: {skip}")
            continue
        except Exception as err:  # a check that crashes has failed
            failed += 1
            print(f"FAIL {title}: the check crashed: {type(err).__name__}: {err}")
            continue
        problems, note = result if isinstance(result, tuple) else (result, "")
        if problems:
            failed += 1
            shown = problems[:8] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
            print(f"FAIL {title}: " + " | ".join(shown))
        else:
            passed += 1
            print(f"PASS {title}" + (f" ({note})" if note else ""))
    summary = f"{passed} passed, {failed} failed"
    if skipped:
        summary += f", {skipped} skipped"
    print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
