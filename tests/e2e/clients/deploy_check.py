#!/usr/bin/env python3
"""Checks the production deployment files under deploy/ without a cluster or a Docker daemon.

    python3 tests/e2e/clients/deploy_check.py [--root REPO] [--k8s-version 1.30.0]

Parses every YAML file under deploy/k8s (multi-document) and every TOML file under deploy/, then
cross-checks them against each other and against the code: kustomizations reference files that
exist; Services, ServiceMonitors, PodDisruptionBudgets and the HorizontalPodAutoscaler select or
target real workloads and ports; probes use declared ports; pods (CronJobs' included) pass the
"restricted" Pod Security rules and have requests and limits; table maintenance runs exactly
once (a CronJob, with the compactors' own turned off); the dashboards live alone in
candor-monitoring with their own ServiceAccount, Kafka user, read-only storage credentials and a
NetworkPolicy that lets them reach only Kafka's TLS listener, the object store, the webhook and
DNS; Secrets are placeholders only and never part of a kustomization; the PrometheusRule equals
dashboards/prometheus/candor.rules.yml; the TOML configs (the services' --config files, the
example configs and the readers' --kafka-config files) use only keys the Rust code declares; the
containers' commands, flags and CANDOR_* variables are ones the binaries declare, and the files
they name are mounted; the Dockerfile builds and installs the three binaries with the system
libraries they link.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

import yaml

DEFAULT_ROOT = Path(__file__).resolve().parents[3]

PIPELINE_NS = "candor"
MONITORING_NS = "candor-monitoring"
NAMESPACES = {PIPELINE_NS, MONITORING_NS}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}
# Run to completion: no Service, probe or PodDisruptionBudget is theirs.
BATCH_KINDS = {"Job", "CronJob"}
DASHBOARDS = "candor-dashboards"
NAME_LABEL = "app.kubernetes.io/name"

# The binaries the image must hold: (package, binary).
BINARIES = [
    ("candor-collector", "candor-collector"),
    ("candor-cli", "candor"),
    ("candor-dashboards", "candor-dashboards"),
]
# Where each binary's clap arguments are declared (glob patterns, read as one source): the
# collector's subcommands take theirs from its role modules.
CLI_SOURCES = {
    "candor-collector": ("collector/src/main.rs", "collector/src/role/*.rs"),
    "candor-dashboards": ("dashboards/src/main.rs",),
    "candor": ("query/cli/src/main.rs",),
}
# The readers' Kafka client settings file (--kafka-config / CANDOR_KAFKA_CONFIG): its Rust loader.
READER_KAFKA_SOURCE = "query/src/kafka_client.rs"
# The services' config structs (`Raw*`), each read with the shared sections it uses: the
# `[dedupe]` section (`RawDedupe`) is declared once, for the compactor and the dashboards.
CONFIG_SOURCES = {
    "collector": ("collector/src/ingest/config.rs", "support/kafka/src/section.rs"),
    "compactor": (
        "collector/src/compact/config.rs",
        "support/kafka/src/section.rs",
        "schema/records/src/ids.rs",
    ),
    "dashboards": (
        "dashboards/src/config.rs",
        "support/kafka/src/section.rs",
        "dashboards/src/access.rs",
        "schema/records/src/ids.rs",
    ),
}
# The rules of every Kafka client's extra settings: what each client role reserves.
KAFKA_SETTINGS_SOURCE = "support/kafka/src/lib.rs"
READER_BINARIES = ("candor-dashboards", "candor")
# (binary, subcommand) that never contact Kafka, so need none of its settings, variables or files.
KAFKA_FREE = {("candor-collector", "maintain"), ("candor-dashboards", "check-rules")}
# Kafka settings any deployed client must use: TLS to the brokers.
KAFKA_TLS_PROTOCOLS = {"SSL", "SASL_SSL"}

# What the dashboards may reach (port, protocol) and how the destination must be selected.
DNS_PORTS = {(53, "UDP"), (53, "TCP")}
# Kafka's TLS/SASL listener only: the dashboards never reach a plaintext listener.
KAFKA_PORTS = {(9093, "TCP")}
OBJECT_STORE_PORTS = {(443, "TCP")}
WEBHOOK_PORTS = {(9093, "TCP")}
WEBHOOK_NAMESPACE = "monitoring"
DASHBOARDS_PORT = 3000

PLACEHOLDER = re.compile(r"REPLACE_ME|CHANGE_ME|<[^<>]+>")

# A mapping parsed from YAML or TOML: its values are whatever the file holds.
Obj = dict[str, Any]
# (namespace, name) of an object.
Ref = tuple[str | None, str | None]
# What a check returns: its problems (empty: passed), with a note when it has one.
CheckResult = list[str] | tuple[list[str], str]


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
    kustomizations: dict[Path, Obj] = field(default_factory=dict)

    @property
    def k8s(self) -> Path:
        return self.root / "deploy" / "k8s"

    def objects(self) -> list[Doc]:
        return [
            d
            for d in self.docs
            if isinstance(d.data, dict) and d.data.get("kind") != "Kustomization"
        ]

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
                    Generated(
                        gen.get("name", ""),
                        gen.get("namespace"),
                        data,
                        gen.get("behavior", "create"),
                        kdir,
                    )
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


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def name_of(obj: Obj) -> str:
    return f"{obj.get('kind')}/{meta(obj).get('namespace', '-')}/{meta(obj).get('name')}"


def pod_template(obj: Obj) -> Obj:
    """The pod template of a workload; a CronJob's is inside its jobTemplate."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return spec.get("template") or {}


def pod_spec(obj: Obj) -> Obj | None:
    if obj.get("kind") in WORKLOAD_KINDS:
        return pod_template(obj).get("spec") or {}
    return None


def template_labels(obj: Obj) -> Obj:
    return (pod_template(obj).get("metadata") or {}).get("labels") or {}


def containers(spec: Obj) -> list[Obj]:
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def workloads(docs: Iterable[Doc]) -> list[Obj]:
    return [d.data for d in docs if d.data.get("kind") in WORKLOAD_KINDS]


def subset(small: Obj, big: Obj) -> bool:
    return all(big.get(k) == v for k, v in small.items())


def selector_matches(selector: Obj, labels: Obj) -> bool:
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


def container_ports(obj: Obj) -> list[Obj]:
    spec = pod_spec(obj) or {}
    return [p for c in containers(spec) for p in (c.get("ports") or [])]


def port_declared(port: Any, ports: list[Obj]) -> bool:
    if isinstance(port, str):
        return any(p.get("name") == port for p in ports)
    return any(p.get("containerPort") == port for p in ports)


def resolve_port(port: Any, ports: list[Obj]) -> int | None:
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
    items: list[str] = []
    buf: list[str] = []
    depth, in_str, prev = 0, False, ""
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
            fields.append(
                (m.group(1), " ".join(m.group(2).split()), " ".join(" ".join(attrs).split()))
            )
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


def cli_source(root: Path, binary: str) -> str:
    """The Rust source of a binary's clap arguments: the files of CLI_SOURCES, joined."""
    texts = []
    for pattern in CLI_SOURCES[binary]:
        paths = sorted(root.glob(pattern))
        if not paths:
            raise FileNotFoundError(root / pattern)
        texts += [path.read_text(encoding="utf-8") for path in paths]
    return "\n".join(texts)


def cli_of(root: Path, binary: str) -> dict[str | None, tuple[set[str], set[str]]]:
    """Subcommand (None for the top level) → (flags, env variables) of a binary."""
    source = cli_source(root, binary)
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


def string_literals_in_match_arm(source: str, arm: str) -> set[str]:
    """The settings named on the left of `=>` in the `match name` of `Role::reserved`'s arm `arm`
    (e.g. `Self::Producer`), up to its `_ => None`."""
    m = re.search(rf"{re.escape(arm)} => match name \{{(.*?)\n\s*_ => None,", source, flags=re.S)
    if not m:
        return set()
    return {
        s
        for line in m.group(1).splitlines()
        if "=>" in line
        for s in re.findall(r'"([^"]+)"', line.split("=>")[0])
    }


# --------------------------------------------------------------------------------------------
# Checks. Each returns a list of problems (empty: passed) or raises Skip.


class Skip(Exception):  # noqa: N818 (not an error: a check that cannot run here)
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
            problems.append(
                f"{where}: namespace {namespace!r}, expected one of {sorted(NAMESPACES)}"
            )
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
                if not any(
                    (target / n).is_file() for n in ("kustomization.yaml", "kustomization.yml")
                ):
                    problems.append(f"{rel}: resource {res} is a directory without a kustomization")
            elif not target.is_file():
                problems.append(f"{rel}: resource {res} does not exist")
            else:
                kinds = [
                    d.data.get("kind") for d in repo.docs if d.path.resolve() == target.resolve()
                ]
                if "Secret" in kinds:
                    problems.append(
                        f"{rel}: resource {res} holds a Secret; Secrets stay out of kustomizations"
                    )
        for patch in k.get("patches") or []:
            if (
                isinstance(patch, dict)
                and patch.get("path")
                and not (kdir / patch["path"]).is_file()
            ):
                problems.append(f"{rel}: patch {patch['path']} does not exist")
        for gen in k.get("configMapGenerator") or []:
            for spec in gen.get("files") or []:
                file = spec.partition("=")[2] or spec
                if not (kdir / file).is_file():
                    problems.append(
                        f"{rel}: configMapGenerator {gen.get('name')} file {file} does not exist"
                    )
            if gen.get("behavior") == "merge":
                bases = [g for g in repo.generated() if g.behavior != "merge"]
                if not any(
                    g.name == gen.get("name") and g.namespace == gen.get("namespace") for g in bases
                ):
                    problems.append(
                        f"{rel}: merges into {gen.get('name')}, which no base generates"
                    )
        if k.get("secretGenerator"):
            problems.append(f"{rel}: secretGenerator: Secrets stay out of kustomizations")
    return problems


def check_schema(repo: Repo, version: str) -> tuple[list[str], str]:
    try:
        import kubernetes_validate
    except ImportError:
        raise Skip("the kubernetes-validate package is not installed") from None
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
    return (
        problems,
        f"{checked} objects valid against Kubernetes {version} (strict); no schema for "
        f"{sorted(custom)}",
    )


def check_workload_selectors(repo: Repo) -> list[str]:
    problems = []
    for obj in workloads(repo.deployed()):
        if obj.get("kind") in BATCH_KINDS:
            # Kubernetes makes a Job's selector itself; its pods must still say whose they are.
            labels = template_labels(obj)
            if not labels.get(NAME_LABEL) or labels.get(NAME_LABEL) != (
                meta(obj).get("labels") or {}
            ).get(NAME_LABEL):
                problems.append(
                    f"{name_of(obj)}: its pod template is not labelled {NAME_LABEL} as the "
                    "object is"
                )
            if obj.get("kind") == "CronJob" and (
                ((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
            ).get("selector"):
                problems.append(f"{name_of(obj)}: sets a Job selector; Kubernetes generates it")
            continue
        selector = (obj.get("spec") or {}).get("selector") or {}
        if not selector.get("matchLabels"):
            problems.append(f"{name_of(obj)}: no spec.selector.matchLabels")
        elif not selector_matches(selector, template_labels(obj)):
            problems.append(
                f"{name_of(obj)}: selector {selector.get('matchLabels')} does not match its "
                "template's labels"
            )
    return problems


def selected_workloads(service: Obj, docs: list[Doc]) -> list[Obj]:
    selector = (service.get("spec") or {}).get("selector") or {}
    namespace = meta(service).get("namespace")
    return [
        w
        for w in workloads(docs)
        if meta(w).get("namespace") == namespace
        and selector
        and subset(selector, template_labels(w))
    ]


def services(docs: list[Doc]) -> list[Obj]:
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
        elif not [w for w in selected_workloads(svc, docs) if w.get("kind") not in BATCH_KINDS]:
            problems.append(
                f"{name_of(svc)}: selector {selector} matches no Deployment/StatefulSet template "
                "in its namespace"
            )
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
                    if (
                        p.get("name") == target
                        if isinstance(target, str)
                        else p.get("containerPort") == target
                    )
                ]
                if not match:
                    problems.append(
                        f"{name_of(svc)} port {port.get('name')}: targetPort {target!r} is not a "
                        f"container port of {name_of(w)}"
                    )
                elif any(p.get("protocol", "TCP") != protocol for p in match):
                    problems.append(
                        f"{name_of(svc)} port {port.get('name')}: protocol differs from "
                        f"{name_of(w)}"
                    )
    return problems


def check_probes(repo: Repo) -> list[str]:
    problems = []
    expected_path = {"readinessProbe": "/readyz", "livenessProbe": "/healthz"}
    for obj in workloads(repo.deployed()):
        if obj.get("kind") in BATCH_KINDS:
            continue  # runs to completion and serves nothing: see batch_problems
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
                    problems.append(
                        f"{name_of(obj)}/{c.get('name')}: {kind} has no httpGet/tcpSocket/grpc"
                    )
                    continue
                if not port_declared(action.get("port"), ports):
                    problems.append(
                        f"{name_of(obj)}/{c.get('name')}: {kind} port {action.get('port')!r} is "
                        "not a declared container port"
                    )
                path = (probe.get("httpGet") or {}).get("path")
                if kind in expected_path and path != expected_path[kind]:
                    problems.append(
                        f"{name_of(obj)}/{c.get('name')}: {kind} path {path!r}, expected "
                        f"{expected_path[kind]}"
                    )
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
            if meta(s).get("namespace") == namespace
            and selector_matches(spec.get("selector") or {}, meta(s).get("labels") or {})
        ]
        if not matched:
            problems.append(f"{name_of(sm)}: selects no Service in {namespace}")
            continue
        for ep in spec.get("endpoints") or []:
            names = {
                p.get("name") for s in matched for p in (s.get("spec") or {}).get("ports") or []
            }
            if ep.get("port") not in names:
                problems.append(
                    f"{name_of(sm)}: endpoint port {ep.get('port')!r} is on none of "
                    f"{[meta(s).get('name') for s in matched]}"
                )
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
    if not any(
        (h.get("spec") or {}).get("scaleTargetRef", {}).get("name") == "candor-collector"
        for h in hpas
    ):
        problems.append("no HorizontalPodAutoscaler for candor-collector")
    min_replicas: dict[Ref, int] = {}
    for hpa in hpas:
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        target = [
            w
            for w in all_workloads
            if w.get("kind") == ref.get("kind")
            and meta(w).get("name") == ref.get("name")
            and meta(w).get("namespace") == meta(hpa).get("namespace")
        ]
        if not target:
            problems.append(
                f"{name_of(hpa)}: scaleTargetRef {ref.get('kind')}/{ref.get('name')} does not exist"
            )
            continue
        w = target[0]
        if "replicas" in (w.get("spec") or {}):
            problems.append(f"{name_of(w)}: sets spec.replicas although {name_of(hpa)} owns it")
        metrics = [
            m.get("resource", {}).get("name")
            for m in spec.get("metrics") or []
            if m.get("type") == "Resource"
        ]
        if "cpu" not in metrics:
            problems.append(f"{name_of(hpa)}: does not scale on CPU")
        for c in containers(pod_spec(w) or {}):
            if not ((c.get("resources") or {}).get("requests") or {}).get("cpu"):
                problems.append(
                    f"{name_of(w)}/{c.get('name')}: no CPU request for the HPA to measure against"
                )
        if spec.get("minReplicas", 1) > spec.get("maxReplicas", 0):
            problems.append(f"{name_of(hpa)}: minReplicas above maxReplicas")
        min_replicas[(meta(w).get("namespace"), meta(w).get("name"))] = spec.get("minReplicas", 1)
    for pdb in (d.data for d in docs if d.data.get("kind") == "PodDisruptionBudget"):
        selector = (pdb.get("spec") or {}).get("selector") or {}
        chosen = [
            w
            for w in all_workloads
            if meta(w).get("namespace") == meta(pdb).get("namespace")
            and selector_matches(selector, template_labels(w))
        ]
        if not selector or not chosen:
            problems.append(f"{name_of(pdb)}: selects no workload")
            continue
        if batch := [name_of(w) for w in chosen if w.get("kind") in BATCH_KINDS]:
            problems.append(
                f"{name_of(pdb)}: also selects the pods of {batch}, which run to completion"
            )
        available = (pdb.get("spec") or {}).get("minAvailable")
        for w in chosen:
            replicas = min_replicas.get(
                (meta(w).get("namespace"), meta(w).get("name")),
                (w.get("spec") or {}).get("replicas", 1),
            )
            if isinstance(available, int) and available >= replicas:
                problems.append(
                    f"{name_of(pdb)}: minAvailable {available} >= {replicas} replicas of "
                    f"{name_of(w)}: no voluntary eviction could ever proceed"
                )
    return problems


def check_pod_security(repo: Repo) -> list[str]:
    problems = []
    docs = repo.deployed()
    accounts = {
        (meta(d.data).get("namespace"), meta(d.data).get("name"))
        for d in docs
        if d.data.get("kind") == "ServiceAccount"
    }
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


def batch_problems(w: Obj) -> list[str]:
    """A Job or CronJob that cannot pile up, hang for ever, or restart in place unseen."""
    problems, who = [], name_of(w)
    spec = w.get("spec") or {}
    job = (
        ((spec.get("jobTemplate") or {}).get("spec") or {}) if w.get("kind") == "CronJob" else spec
    )
    if w.get("kind") == "CronJob":
        if spec.get("concurrencyPolicy") != "Forbid":
            problems.append(
                f"{who}: concurrencyPolicy {spec.get('concurrencyPolicy', 'Allow')!r}: two runs "
                "could overlap"
            )
        if spec.get("startingDeadlineSeconds") is None:
            problems.append(
                f"{who}: no startingDeadlineSeconds: missed runs are started late, all at once"
            )
    if not job.get("activeDeadlineSeconds"):
        problems.append(f"{who}: no activeDeadlineSeconds: a hung run blocks every later one")
    if (pod_spec(w) or {}).get("restartPolicy") not in {"Never", "OnFailure"}:
        problems.append(f"{who}: restartPolicy must be Never or OnFailure")
    for c in containers(pod_spec(w) or {}):
        for key in ("readinessProbe", "livenessProbe", "startupProbe", "ports"):
            if c.get(key):
                problems.append(f"{who}/{c.get('name')}: {key} on a pod that serves nothing")
    return problems


# A container that runs table maintenance or compaction: (workload, container, its parsed
# --config, its tables as (namespace, config ConfigMap, CANDOR_TABLE_ROOT's source), arguments).
TableUser = tuple[Obj, Obj, Obj, tuple[str | None, str | None, str | None], list[str]]


def check_maintenance(repo: Repo) -> tuple[list[str], str]:
    """Table maintenance runs once per schedule: the compactor replicas' own is off
    (maintenance.enabled = false) and one CronJob runs `candor-collector maintain` on their tables,
    or a single compactor runs it itself. Every batch workload passes batch_problems."""
    problems = []
    docs = repo.deployed()
    maps = configmaps(repo)
    compactors: list[TableUser] = []
    maintainers: list[TableUser] = []
    for w in workloads(docs):
        if w.get("kind") in BATCH_KINDS:
            problems += batch_problems(w)
        ns, spec = meta(w).get("namespace"), pod_spec(w) or {}
        for c in containers(spec):
            binary, sub, args = invocation(c)
            if binary != "candor-collector" or sub not in {"compact", "maintain"}:
                continue
            path, config = next(
                (
                    (path, cfg)
                    for flag, path, cfg in container_configs(c, spec, ns, maps)[0]
                    if flag == "--config"
                ),
                (None, {}),
            )
            mount = mount_for(c, spec, path) if path else None
            # Its tables: the ConfigMap of its config file, and where CANDOR_TABLE_ROOT comes from.
            config_map = (mount[1].get("configMap") or {}).get("name") if mount else None
            root_env = next(
                (
                    yaml.safe_dump(e, sort_keys=True)
                    for e in c.get("env") or []
                    if e.get("name") == "CANDOR_TABLE_ROOT"
                ),
                None,
            )
            tables = (ns, config_map, root_env)
            (compactors if sub == "compact" else maintainers).append((w, c, config, tables, args))
    for w, _, config, _, args in maintainers:
        if w.get("kind") != "CronJob":
            problems.append(
                f"{name_of(w)}: runs `candor-collector maintain`, which exits when done: make it "
                "a CronJob"
            )
        if "--retention" in args and not (config.get("maintenance") or {}).get("retention_days"):
            problems.append(
                f"{name_of(w)}: maintain --retention is refused while maintenance.retention_days "
                "= 0"
            )
    hpa_targets = {
        ((d.data.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        for d in docs
        if d.data.get("kind") == "HorizontalPodAutoscaler"
    }
    notes = []
    for w, _, config, tables, _ in compactors:
        enabled = (config.get("maintenance") or {}).get("enabled", True)
        replicas = (w.get("spec") or {}).get("replicas", 1)
        mine = [name_of(m[0]) for m in maintainers if m[3] == tables]
        if enabled and mine:
            problems.append(
                f"{name_of(w)}: maintenance runs twice: in the compactor (maintenance.enabled = "
                f"true) and in {mine}"
            )
        elif enabled and (replicas > 1 or meta(w).get("name") in hpa_targets):
            problems.append(
                f"{name_of(w)}: each of its {replicas} replicas runs maintenance on every table: "
                "set maintenance.enabled = false and run `candor-collector maintain` from a "
                "CronJob"
            )
        elif not enabled and not mine:
            problems.append(
                f"{name_of(w)}: no maintenance runs: maintenance.enabled = false and no CronJob "
                "runs `candor-collector maintain` on its tables"
            )
        elif len(mine) > 1:
            problems.append(f"{name_of(w)}: its tables are maintained by several workloads {mine}")
        notes.append(
            f"{meta(w).get('name')}: maintenance.enabled = {str(enabled).lower()}, maintained by "
            f"{[n.split('/')[-1] for n in mine] or 'itself'}"
        )
    if not compactors:
        problems.append("no compactor (candor-collector compact) found")
    return problems, "; ".join(notes)


def env_secret_refs(c: Obj) -> list[tuple[str, str | None]]:
    refs = []
    for e in c.get("env") or []:
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            refs.append((ref.get("name"), ref.get("key")))
    for e in c.get("envFrom") or []:
        if e.get("secretRef"):
            refs.append((e["secretRef"].get("name"), None))
    return refs


def secret_refs(obj: Obj) -> list[tuple[str, str | None]]:
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
    ours = [
        d.data for d in docs if (meta(d.data).get("labels") or {}).get(NAME_LABEL) == DASHBOARDS
    ]
    for kind in (
        "Deployment",
        "Service",
        "ServiceAccount",
        "NetworkPolicy",
        "PrometheusRule",
        "ServiceMonitor",
    ):
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
    other_accounts = {
        (meta(w).get("namespace"), (pod_spec(w) or {}).get("serviceAccountName")) for w in others
    }
    other_secrets = {name for w in others for name, _ in secret_refs(w)}
    for w in dash:
        spec = pod_spec(w) or {}
        if (meta(w).get("namespace"), spec.get("serviceAccountName")) in other_accounts:
            problems.append(f"{name_of(w)}: shares its ServiceAccount with the pipeline")
        refs = secret_refs(w)
        if shared := {n for n, _ in refs} & other_secrets:
            problems.append(f"{name_of(w)}: uses the pipeline's Secrets {sorted(shared)}")
        storage = [
            n
            for c in containers(spec)
            for e in c.get("env") or []
            if e.get("name", "").startswith("AWS_")
            and (n := ((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name"))
        ]
        if not storage:
            problems.append(f"{name_of(w)}: no storage credentials from a Secret")
        elif not all("readonly" in n or "read-only" in n for n in storage):
            problems.append(
                f"{name_of(w)}: storage credentials {sorted(set(storage))} are not the read-only "
                "ones"
            )
        for c in containers(spec):
            for e in c.get("env") or []:
                if (
                    e.get("name") == "CANDOR_DASHBOARDS_GROUP"
                    and e.get("value") == "candor-compactor"
                ):
                    problems.append(f"{name_of(w)}: uses the compactor's consumer group")
    # Their own Kafka principal: never one of the pipeline's, whose ACLs write.
    maps = configmaps(repo)

    def kafka_users(ws: list[Obj]) -> set[str]:
        users: set[str | None] = set()
        for w in ws:
            spec = pod_spec(w) or {}
            for c in containers(spec):
                for _, _, config in container_configs(c, spec, meta(w).get("namespace"), maps)[0]:
                    if uses_kafka(c):
                        users.add(
                            ((config.get("kafka") or {}).get("extra") or {}).get("sasl.username")
                        )
        return {user for user in users if user is not None}

    dash_users, pipeline_users = kafka_users(dash), kafka_users(others)
    if shared := dash_users & pipeline_users:
        problems.append(f"dashboards log in to Kafka as the pipeline's user(s) {sorted(shared)}")
    return problems


def policy_ports(rule: Obj) -> set[tuple[Any, str]]:
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
        and any(
            selector_matches(
                (d.data.get("spec") or {}).get("podSelector") or {}, template_labels(w)
            )
            for w in dash
        )
    ]
    if not dash:
        return ["no dashboards workload"]
    if len(policies) != 1:
        return [
            f"expected exactly one NetworkPolicy selecting the dashboards in {MONITORING_NS}, "
            f"found {len(policies)}"
        ]
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
            problems.append(
                f"{who}: ingress rule allows {sorted(map(str, resolved))}, expected only "
                f"{DASHBOARDS_PORT}/TCP"
            )
    seen, kafka_ports = set(), set()
    for i, rule in enumerate(spec.get("egress") or []):
        ports = policy_ports(rule)
        peers = rule.get("to") or []
        if not ports:
            problems.append(f"{who}: egress rule {i} allows every port")
            continue
        if not peers:
            problems.append(f"{who}: egress rule {i} allows every destination")
            continue
        ns_names = {
            ((p.get("namespaceSelector") or {}).get("matchLabels") or {}).get(
                "kubernetes.io/metadata.name"
            )
            for p in peers
        }
        ip_blocks = [p.get("ipBlock") for p in peers if p.get("ipBlock")]
        if ports <= DNS_PORTS:
            if ns_names != {"kube-system"} or ip_blocks:
                problems.append(f"{who}: DNS egress rule {i} is not limited to kube-system")
            seen.add("dns")
        elif ports <= OBJECT_STORE_PORTS:
            seen.add("object store")
            for block in ip_blocks:
                if block.get("cidr") == "0.0.0.0/0" and not {
                    "10.0.0.0/8",
                    "172.16.0.0/12",
                    "192.168.0.0/16",
                } <= set(block.get("except") or []):
                    problems.append(
                        f"{who}: object-store egress rule {i} reaches private addresses too"
                    )
        elif ports <= WEBHOOK_PORTS and ns_names == {WEBHOOK_NAMESPACE}:
            seen.add("webhook")
        elif ports <= KAFKA_PORTS:
            if not ns_names - {None} and not ip_blocks:
                problems.append(f"{who}: Kafka egress rule {i} names no destination")
            seen.add("kafka")
            kafka_ports |= {port for port, _ in ports}
        else:
            problems.append(
                f"{who}: egress rule {i} allows {sorted(map(str, ports))}, outside Kafka TLS "
                "9093, object store 443, webhook 9093 and DNS 53"
            )
    for need in ("dns", "kafka", "object store", "webhook"):
        if need not in seen:
            problems.append(f"{who}: no egress rule for {need}")
    # The brokers the dashboards bootstrap from are behind a port the policy lets through.
    maps = configmaps(repo)
    for w in dash:
        for c in containers(pod_spec(w) or {}):
            brokers = (
                flag_value(invocation(c)[2], "--kafka")
                or env_value(c, "CANDOR_KAFKA", meta(w).get("namespace"), maps)
                or ""
            )
            for broker in filter(None, (b.strip() for b in brokers.split(","))):
                port = broker.rpartition(":")[2]
                if port.isdigit() and int(port) not in kafka_ports:
                    problems.append(
                        f"{who}: {name_of(w)} bootstraps from {broker}, a port its Kafka egress "
                        f"rule does not allow ({sorted(kafka_ports)})"
                    )
    return problems


def secret_values(obj: Obj) -> Iterable[tuple[str, str]]:
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
                problems.append(
                    f"{d.where(repo.root)} {name_of(d.data)} key {key}: value does not look like "
                    "a placeholder"
                )
    for d in repo.deployed():
        if d.data.get("kind") == "Secret":
            problems.append(
                f"{name_of(d.data)}: a Secret among the resources a kustomization applies"
            )
    return problems, f"{len(secrets)} example Secrets, every value a placeholder; none applied"


def example_secrets(repo: Repo) -> dict[Ref, set[str]]:
    """The example Secrets, (namespace, name) -> their keys."""
    return {
        (meta(d.data).get("namespace"), meta(d.data).get("name")): {
            k for k, _ in secret_values(d.data)
        }
        for d in repo.objects()
        if d.data.get("kind") == "Secret"
    }


def check_secret_refs(repo: Repo) -> list[str]:
    problems = []
    examples = example_secrets(repo)
    for w in workloads(repo.deployed()):
        ns = meta(w).get("namespace")
        for name, key in secret_refs(w):
            if (ns, name) not in examples:
                problems.append(
                    f"{name_of(w)}: Secret {ns}/{name} is not described in a *.example.yaml"
                )
            elif key is not None and key not in examples[(ns, name)]:
                problems.append(f"{name_of(w)}: Secret {ns}/{name} has no key {key} in its example")
    return problems


def configmaps(repo: Repo) -> dict[Ref, dict[str, str]]:
    """(namespace, name) → data, of ConfigMap resources and generators (merges applied)."""
    out: dict[Ref, dict[str, str]] = {}
    for d in repo.deployed():
        if d.data.get("kind") == "ConfigMap":
            out[(meta(d.data).get("namespace"), meta(d.data).get("name"))] = dict(
                d.data.get("data") or {}
            )
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
                    problems.append(
                        f"{name_of(w)}: ConfigMap {ns}/{ref.get('name')} is neither a resource "
                        "nor generated"
                    )
                elif ref.get("key") not in data:
                    problems.append(
                        f"{name_of(w)}: ConfigMap {ns}/{ref.get('name')} has no key "
                        f"{ref.get('key')}"
                    )
                elif not str(data[ref.get("key")]).strip() and not ref.get("optional"):
                    problems.append(
                        f"{name_of(w)}: {ns}/{ref.get('name')} key {ref.get('key')} is empty "
                        "(the binaries take an empty variable as a value)"
                    )
        for v in spec.get("volumes") or []:
            if v.get("configMap") and (ns, v["configMap"].get("name")) not in maps:
                problems.append(
                    f"{name_of(w)}: volume ConfigMap {ns}/{v['configMap'].get('name')} is "
                    "neither a resource nor generated"
                )
    return problems


def mount_for(c: Obj, spec: Obj, path: str) -> tuple[Obj, Obj] | None:
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


def invocation(c: Obj) -> tuple[str | None, str | None, list[str]]:
    """(binary, subcommand or None, arguments) of a container's command and args."""
    command = list(c.get("command") or [])
    args = command[1:] + list(c.get("args") or [])
    sub = args[0] if args and not args[0].startswith("-") else None
    return (command[0] if command else None), sub, args


def flag_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def env_value(c: Obj, name: str, ns: str | None, maps: dict[Ref, dict[str, str]]) -> str | None:
    """A container variable's value: literal, or from a ConfigMap key."""
    for e in c.get("env") or []:
        if e.get("name") != name:
            continue
        if "value" in e:
            return str(e["value"])
        ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
        if ref:
            return maps.get((ns, ref.get("name")), {}).get(ref.get("key"))
    return None


# The variable that stands for --config, by subcommand of candor-collector.
CONFIG_ENV = {
    "ingest": "CANDOR_COLLECTOR_CONFIG",
    "compact": "CANDOR_COMPACTOR_CONFIG",
    "maintain": "CANDOR_COMPACTOR_CONFIG",
}
# The variable that stands for the dashboards' --config.
DASHBOARDS_CONFIG_ENV = "CANDOR_DASHBOARDS_CONFIG"


def config_files(c: Obj, ns: str | None, maps: dict[Ref, dict[str, str]]) -> list[tuple[str, str]]:
    """(flag, path) of the TOML files a container reads: `--config` (the collector's roles and the
    dashboards) and `--kafka-config` (the readers' Kafka client settings), from the flag or its
    variable."""
    binary, sub, args = invocation(c)
    out = []
    if binary == "candor-collector":
        path = flag_value(args, "--config") or (
            env_value(c, CONFIG_ENV[sub], ns, maps) if sub in CONFIG_ENV else None
        )
        if path:
            out.append(("--config", path))
    if binary == DASHBOARDS:
        path = flag_value(args, "--config") or env_value(c, DASHBOARDS_CONFIG_ENV, ns, maps)
        if path:
            out.append(("--config", path))
    if binary in READER_BINARIES:
        path = flag_value(args, "--kafka-config") or env_value(c, "CANDOR_KAFKA_CONFIG", ns, maps)
        if path:
            out.append(("--kafka-config", path))
    return out


def mounted_file(
    c: Obj, spec: Obj, ns: str | None, maps: dict[Ref, dict[str, str]], path: str
) -> tuple[str | None, str]:
    """The text of a file under a ConfigMap mount, or None and why it cannot be read."""
    found = mount_for(c, spec, path)
    if not found or not found[1].get("configMap"):
        return None, f"{path} is not under a ConfigMap mount"
    name = found[1]["configMap"].get("name")
    key = path[len(found[0]["mountPath"].rstrip("/")) + 1 :]
    data = maps.get((ns, name), {})
    if key not in data:
        return None, f"ConfigMap {name} has no key {key}"
    return data[key], ""


def container_configs(
    c: Obj, spec: Obj, ns: str | None, maps: dict[Ref, dict[str, str]]
) -> tuple[list[tuple[str, str, Obj]], list[str]]:
    """(flag, path, parsed TOML) of each file the container reads, and what could not be read."""
    configs, problems = [], []
    for flag, path in config_files(c, ns, maps):
        text, why = mounted_file(c, spec, ns, maps, path)
        if text is None:
            problems.append(f"{flag} {why}")
            continue
        try:
            configs.append((flag, path, tomllib.loads(text)))
        except tomllib.TOMLDecodeError as err:
            problems.append(f"{flag} {path} is not TOML: {err}")
    return configs, problems


def uses_kafka(c: Obj) -> bool:
    binary, sub, _ = invocation(c)
    return binary in CLI_SOURCES and (binary, sub) not in KAFKA_FREE


def kafka_needs(config: Obj, reads_kafka: bool) -> tuple[list[str], list[str]]:
    """The variables and files a config makes its process read: the OTLP token and TLS files, and,
    for a process that talks to Kafka, the variables of kafka.extra_env and the *.location files."""
    otlp, kafka = config.get("otlp") or {}, config.get("kafka") or {}
    variables = [otlp.get("auth_token_env")]
    files = [otlp.get("tls_cert_path"), otlp.get("tls_key_path")]
    if reads_kafka:
        variables += list((kafka.get("extra_env") or {}).values())
        files += [v for k, v in (kafka.get("extra") or {}).items() if k.endswith(".location")]
    return [v for v in variables if v], [f for f in files if f]


def check_config_mounts(repo: Repo) -> list[str]:
    problems = []
    maps = configmaps(repo)
    examples = example_secrets(repo)
    for w in workloads(repo.deployed()):
        ns = meta(w).get("namespace")
        spec = pod_spec(w) or {}
        for c in containers(spec):
            who = f"{name_of(w)}/{c.get('name')}"
            configs, unreadable = container_configs(c, spec, ns, maps)
            problems += [f"{who}: {p}" for p in unreadable]
            env_names = {e.get("name") for e in c.get("env") or []}
            protocols = []
            # The dashboards' --kafka-config replaces the [kafka.extra] tables of their --config.
            replaced = invocation(c)[0] == DASHBOARDS and any(
                flag == "--kafka-config" for flag, _, _ in configs
            )
            for flag, path, config in configs:
                key = Path(path).name
                if uses_kafka(c) and not (replaced and flag == "--config"):
                    protocols.append(
                        ((config.get("kafka") or {}).get("extra") or {}).get(
                            "security.protocol", "PLAINTEXT"
                        )
                    )
                variables, files = kafka_needs(config, uses_kafka(c))
                for var in variables:
                    if var not in env_names:
                        problems.append(
                            f"{who}: {key} names the variable {var}, which the container does "
                            "not set"
                        )
                for file in files:
                    mounted = mount_for(c, spec, file)
                    if not mounted:
                        problems.append(f"{who}: {key} reads {file}, which no volume provides")
                        continue
                    secret = mounted[1].get("secret")
                    rel = file[len(mounted[0]["mountPath"].rstrip("/")) + 1 :]
                    if (
                        secret
                        and (ns, secret.get("secretName")) in examples
                        and rel not in examples[(ns, secret.get("secretName"))]
                    ):
                        problems.append(
                            f"{who}: {file} needs key {rel} in Secret {secret.get('secretName')}"
                        )
            # Every Kafka client deployed here speaks TLS to the brokers.
            if uses_kafka(c) and not unreadable:
                if not protocols:
                    problems.append(
                        f"{who}: talks to Kafka with no settings file (--config or "
                        "--kafka-config): plaintext, no SASL"
                    )
                for protocol in protocols:
                    if str(protocol).upper() not in KAFKA_TLS_PROTOCOLS:
                        problems.append(f"{who}: security.protocol {protocol!r}: Kafka without TLS")
    return problems


class Stage(TypedDict):
    """A Dockerfile stage: its base image, its `AS` name and its (instruction, arguments)."""

    image: str
    alias: str | None
    inst: list[tuple[str, str]]


def dockerfile_stages(text: str) -> tuple[dict[str, str], list[Stage]]:
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
    stages: list[Stage] = []
    for inst in logical:
        op, _, rest = inst.partition(" ")
        op = op.upper()
        if op == "ARG" and not stages:
            k, _, v = rest.partition("=")
            args[k.strip()] = v.strip()
        elif op == "FROM":
            parts = rest.split()
            image = re.sub(
                r"\$\{(\w+)\}|\$(\w+)",
                lambda m: args.get(m.group(1) or m.group(2), m.group(0)),
                parts[0],
            )
            alias = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append({"image": image, "alias": alias, "inst": []})
        elif stages:
            stages[-1]["inst"].append((op, rest))
    return args, stages


def cargo_package(root: Path, package: str) -> Path | None:
    """The manifest of the workspace member named `package`."""
    workspace = tomllib.loads((root / "Cargo.toml").read_text(encoding="utf-8"))
    members: list[str] = workspace["workspace"]["members"]
    for member in members:
        manifest = root / member / "Cargo.toml"
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


def rdkafka_features(root: Path) -> set[str]:
    """rdkafka's features: the workspace's and every member's."""
    features: set[str] = set()
    manifests = [root / "Cargo.toml", *sorted(root.glob("*/Cargo.toml"))]
    for manifest in manifests:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        for deps in (
            (data.get("workspace") or {}).get("dependencies") or {},
            data.get("dependencies") or {},
        ):
            spec = deps.get("rdkafka")
            if isinstance(spec, dict):
                features |= set(spec.get("features") or [])
    return features


def apt_installed(stage: Stage) -> set[str]:
    """The packages a stage's RUN instructions name to `apt-get install`."""
    packages = set()
    for op, rest in stage["inst"]:
        if op == "RUN":
            for command in re.findall(r"apt-get\s+install\b([^&;|]*)", rest):
                packages |= {word for word in command.split() if not word.startswith("-")}
    return packages


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
            declared = {
                b.get("name")
                for b in tomllib.loads(manifest.read_text(encoding="utf-8")).get("bin") or []
            }
            if binary not in declared:
                problems.append(f"{manifest.relative_to(repo.root)} declares no binary {binary}")
    runtime_text = " ".join(rest for _, rest in runtime["inst"])
    for _, binary in BINARIES:
        if not re.search(
            rf"COPY --from={re.escape(builder['alias'] or '0')} \S*{re.escape(binary)} "
            rf"/usr/local/bin/{re.escape(binary)}\b",
            " ".join(f"{op} {rest}" for op, rest in runtime["inst"]),
        ):
            problems.append(f"the runtime stage does not copy {binary} into /usr/local/bin")
    if "ca-certificates" not in runtime_text:
        problems.append("the runtime stage does not install ca-certificates")
    # rdkafka's `ssl` feature links the system's OpenSSL (`ssl-vendored` would build its own).
    features = rdkafka_features(repo.root)
    if "ssl" in features and "ssl-vendored" not in features:
        for package in ("libssl-dev", "pkg-config"):
            if package not in apt_installed(builder):
                problems.append(
                    f"the builder stage does not install {package}, which rdkafka's ssl feature "
                    "builds against"
                )
        if "libssl3" not in apt_installed(runtime):
            problems.append(
                "the runtime stage does not install libssl3, which the binaries link (rdkafka's "
                "ssl feature)"
            )
    users = [rest.split(":")[0] for op, rest in runtime["inst"] if op == "USER"]
    if not users or not users[-1].isdigit() or users[-1] == "0":
        problems.append(
            f"the runtime stage's USER {users[-1] if users else None!r} is not a numeric "
            "non-root user"
        )
    else:
        for w in workloads(repo.deployed()):
            uid = ((pod_spec(w) or {}).get("securityContext") or {}).get("runAsUser")
            if uid is not None and str(uid) != users[-1]:
                problems.append(
                    f"{name_of(w)}: runAsUser {uid} differs from the image's USER {users[-1]}"
                )
    if any(op == "ENTRYPOINT" for op, _ in runtime["inst"]):
        problems.append(
            "the image has an ENTRYPOINT; each workload chooses its binary with `command`"
        )
    # The build context: the Dockerfile-specific ignore file.
    ignore = repo.root / "deploy/docker/Dockerfile.dockerignore"
    if not ignore.is_file():
        problems.append("deploy/docker/Dockerfile.dockerignore missing")
    else:
        patterns = [
            line.strip()
            for line in ignore.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        ]
        members = tomllib.loads((repo.root / "Cargo.toml").read_text(encoding="utf-8"))[
            "workspace"
        ]["members"]
        needed = ["Cargo.toml", "Cargo.lock"] + [
            f"deploy/{name}.example.toml" for name in ("collector", "compactor", "dashboards")
        ]
        needed += [f"{m}/Cargo.toml" for m in members] + [
            f"{m}/src" for m in members if (repo.root / m / "src").is_dir()
        ]
        for path in needed:
            if dockerignore_excludes(patterns, path):
                problems.append(f"Dockerfile.dockerignore excludes {path}, which the build needs")
        for path in ("target/release", ".git/HEAD", "data/tables"):
            if not dockerignore_excludes(patterns, path):
                problems.append(f"Dockerfile.dockerignore lets {path} into the context")
    binaries = ", ".join(b for _, b in BINARIES)
    return (
        problems,
        f"{builder['image']} builds {binaries}; {runtime['image']} runs them as UID "
        f"{users[-1] if users else '?'}; rdkafka features {sorted(features)}",
    )


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
                problems.append(
                    f"{who}: command {binary!r} is not one of the image's binaries {sorted(clis)}"
                )
                continue
            args = list(command[1:]) + list(c.get("args") or [])
            cli = clis[binary]
            sub = None
            if args and not args[0].startswith("-"):
                sub = args[0]
                if sub not in cli:
                    problems.append(
                        f"{who}: {binary} has no subcommand {sub!r} (has "
                        f"{sorted(k for k in cli if k)})"
                    )
                    continue
            elif any(k for k in cli) and None not in cli:
                problems.append(f"{who}: {binary} needs a subcommand")
                continue
            flags, envs = cli[sub]
            called = binary + (f" {sub}" if sub else "")
            for a in args:
                if a.startswith("--"):
                    flag = a[2:].split("=", 1)[0]
                    if flag not in flags and flag not in {"help", "version"}:
                        problems.append(f"{who}: {called} declares no flag --{flag}")
            # Variables its config files make it read count as declared too (kafka.extra_env only
            # where the process talks to Kafka: `maintain` reads no Kafka password).
            named = set()
            for _, _, config in container_configs(c, spec, ns, maps)[0]:
                named |= set(kafka_needs(config, uses_kafka(c))[0])
            for e in c.get("env") or []:
                var = e.get("name", "")
                if var.startswith("CANDOR_") and var not in envs | named:
                    problems.append(f"{who}: {called} reads no variable {var}")
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


def rust_schema(source: str, struct: str) -> Obj:
    """A config struct as {key: type or nested schema}; a field whose type is a struct of the same
    source is a table."""
    out: dict[str, Any] = {}
    for name, ty, _ in rust_struct_fields(source, struct):
        inner = re.sub(r"^Option<(.*)>$", r"\1", ty)
        nested = inner.startswith("Raw") or re.search(rf"\bstruct {re.escape(inner)}\s*\{{", source)
        out[name] = rust_schema(source, inner) if nested else inner
    return out


def reader_reserved(root: Path) -> set[str]:
    """The settings a readers' Kafka client settings file may not name: the brokers, the readers'
    own (READER_OWNED), those each reader passes to KafkaClientSettings::load as its own and the
    dashboards' KAFKA_OWNED."""
    source = (root / KAFKA_SETTINGS_SOURCE).read_text(encoding="utf-8")
    reserved = set()
    owned = re.search(r"const READER_OWNED[^=]*=\s*&\[(.*?)\];", source, flags=re.S)
    brokers = re.search(r'((?:"[^"]+"\s*\|\s*)*"[^"]+")\s*=>\s*Some\("set by --kafka"\)', source)
    if owned and brokers:
        reserved |= set(re.findall(r'"([^"]+)"', owned.group(1))) | set(
            re.findall(r'"([^"]+)"', brokers.group(1))
        )
    for binary in READER_BINARIES:
        main = cli_source(root, binary)
        for load in re.finditer(
            r"KafkaClientSettings::load\(\s*[^,]+,\s*&\[(.*?)\]\s*\)", main, flags=re.S
        ):
            reserved |= set(re.findall(r'\(\s*"([^"]+)"\s*,', load.group(1)))
    # The dashboards' own, which their [kafka] tables (or --kafka-config) may not set either.
    dashboards = (root / CONFIG_SOURCES["dashboards"][0]).read_text(encoding="utf-8")
    own = re.search(r"const KAFKA_OWNED[^=]*=\s*&\[(.*?)\];", dashboards, flags=re.S)
    if own:
        reserved |= set(re.findall(r'\(\s*"([^"]+)"\s*,', own.group(1)))
    return reserved


def toml_kind(path: Path) -> str | None:
    """Which loader reads a TOML file under deploy/, by its name."""
    if "compactor" in path.name:
        return "compactor"
    if "collector" in path.name:
        return "collector"
    if "kafka" in path.name:
        return "reader"
    if "dashboards" in path.name:
        return "dashboards"
    return None


def config_source(root: Path, kind: str) -> str:
    """The Rust source of a service's config structs: the files of CONFIG_SOURCES, joined."""
    return "\n".join((root / rel).read_text(encoding="utf-8") for rel in CONFIG_SOURCES[kind])


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


def schema_problems(schema: Obj, data: Obj, prefix: str = "") -> list[str]:
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
    """Every key of every collector/compactor/dashboards TOML under deploy/ is declared by the Rust
    structs, with a value of the declared type; kafka.extra holds no setting the code reserves or
    refuses."""
    problems = []
    reader_src = (repo.root / READER_KAFKA_SOURCE).read_text(encoding="utf-8")
    settings_src = (repo.root / KAFKA_SETTINGS_SOURCE).read_text(encoding="utf-8")
    kinds = {
        "collector": (
            rust_schema(config_source(repo.root, "collector"), "RawConfig"),
            string_literals_in_match_arm(settings_src, "Self::Producer"),
        ),
        "compactor": (
            rust_schema(config_source(repo.root, "compactor"), "RawCompactConfig"),
            string_literals_in_match_arm(settings_src, "Self::Consumer"),
        ),
        "dashboards": (
            rust_schema(config_source(repo.root, "dashboards"), "RawConfig"),
            reader_reserved(repo.root),
        ),
        "reader": (rust_schema(reader_src, "SettingsFile"), reader_reserved(repo.root)),
    }
    for kind, (schema, reserved) in kinds.items():
        if len(schema) < (1 if kind == "reader" else 4) or not reserved:
            problems.append(f"could not read the {kind}'s config structs from the Rust source")
    reader_kafka = kinds["reader"][0].get("kafka")
    if not isinstance(reader_kafka, dict) or set(reader_kafka) != {"extra", "extra_env"}:
        problems.append(
            f"{READER_KAFKA_SOURCE}: expected a file of [kafka.extra] and [kafka.extra_env] "
            f"only, read {kinds['reader'][0]}"
        )
    checked: dict[str, int] = {}
    for path in sorted((repo.root / "deploy").rglob("*.toml")):
        rel = path.relative_to(repo.root)
        loader = toml_kind(path)
        if loader is None:
            problems.append(
                f"{rel}: no loader known for it (name it after collector, compactor, dashboards "
                "or *-kafka)"
            )
            continue
        checked[loader] = checked.get(loader, 0) + 1
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError:
            continue  # reported by the parse check
        schema, reserved = kinds[loader]
        problems += [f"{rel}: {p}" for p in schema_problems(schema, data)]
        kafka = data.get("kafka") or {}
        for setting in list(kafka.get("extra") or {}) + list(kafka.get("extra_env") or {}):
            if setting in reserved:
                problems.append(f"{rel}: kafka setting {setting!r} is reserved by the code")
        for setting in kafka.get("extra") or {}:
            if setting.endswith("password") or "secret" in setting or setting == "ssl.key.pem":
                problems.append(
                    f"{rel}: kafka.extra.{setting!r} is a secret: the code wants it in "
                    "kafka.extra_env"
                )
        for var in [
            *(kafka.get("extra_env") or {}).values(),
            (data.get("otlp") or {}).get("auth_token_env"),
        ]:
            if var is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                problems.append(f"{rel}: {var!r} is not an environment variable name")
    counts = ", ".join(f"{checked.get(k, 0)} {k}" for k in kinds)
    return (
        problems,
        f"{counts} files against the collector's RawConfig / RawCompactConfig / the dashboards' "
        "RawConfig / the readers' File",
    )


def check_config_copies(repo: Repo) -> tuple[list[str], str]:
    problems = []
    pairs = [
        ("deploy/config/collector.kafka-sasl-tls.toml", "deploy/k8s/base/files/collector.toml"),
        ("deploy/config/compactor.s3.toml", "deploy/k8s/base/files/compactor.toml"),
        ("deploy/config/dashboards-kafka.toml", "deploy/k8s/base/files/dashboards-kafka.toml"),
        ("deploy/config/dashboards.tls-auth.toml", "deploy/k8s/base/files/dashboards.toml"),
    ]
    for source, copy in pairs:
        a, b = repo.root / source, repo.root / copy
        if not a.is_file() or not b.is_file():
            problems.append(f"{source} or {copy} missing")
        elif a.read_bytes() != b.read_bytes():
            problems.append(f"{copy} differs from {source}: cp {source} {copy}")
    # A new file on either side needs its pair here.
    for folder, known in (
        ("deploy/config", {s for s, _ in pairs}),
        ("deploy/k8s/base/files", {c for _, c in pairs}),
    ):
        for path in sorted((repo.root / folder).glob("*")):
            rel = str(path.relative_to(repo.root))
            if path.is_file() and rel not in known:
                problems.append(f"{rel} has no pair in check_config_copies")
    return problems, f"{len(pairs)} pairs, byte for byte"


def generator(repo: Repo) -> ModuleType:
    # Imported from its path; no __pycache__ is left in the tree.
    sys.dont_write_bytecode = True
    path = repo.root / "deploy/k8s/gen_prometheusrule.py"
    spec = importlib.util.spec_from_file_location("gen_prometheusrule", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
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
    rule = yaml.safe_load(
        (repo.root / "deploy/k8s/base/prometheusrule.yaml").read_text(encoding="utf-8")
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prometheusrule-groups.yml"
        path.write_text(
            yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False), encoding="utf-8"
        )
        run = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True
        )
    if run.returncode != 0:
        return [(run.stdout + run.stderr).strip().replace("\n", " | ")], ""
    return [], (run.stdout.strip().splitlines() or [""])[-1].strip()


def check_kustomize(repo: Repo, version: str) -> tuple[list[str], str]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise Skip("kubectl not found")
    try:
        import kubernetes_validate
    except ImportError:
        kubernetes_validate = None
    problems, notes = [], []
    base_kafka: dict[Ref, str] | None = None
    # The base sorts before the overlays: its placeholder bootstrap is known when they are read.
    for kdir in sorted(repo.kustomizations):
        rel = kdir.relative_to(repo.root)
        run = subprocess.run([kubectl, "kustomize", str(kdir)], capture_output=True, text=True)
        if run.returncode != 0:
            err = re.search(r'err="(.*)"', run.stderr)
            problems.append(
                f"{rel}: kubectl kustomize failed: "
                f"{err.group(1) if err else run.stderr.strip() or run.returncode}"
            )
            continue
        objs = [o for o in yaml.safe_load_all(run.stdout) if o]
        notes.append(f"{rel}: {len(objs)} objects")
        kafka = {
            k: v
            for o in objs
            if o.get("kind") == "ConfigMap"
            for k, v in [
                (
                    (meta(o).get("namespace"), meta(o).get("name", "").rsplit("-", 1)[0]),
                    (o.get("data") or {}).get("kafka-brokers"),
                )
            ]
            if v is not None
        }
        if "overlays" not in rel.parts:
            base_kafka = kafka
        elif kafka and kafka == base_kafka:
            problems.append(f"{rel}: keeps the base's placeholder Kafka bootstrap")
        if any(o.get("kind") == "Secret" for o in objs):
            problems.append(f"{rel}: renders a Secret")
        cms = {
            (meta(o).get("namespace"), meta(o).get("name")): o.get("data") or {}
            for o in objs
            if o.get("kind") == "ConfigMap"
        }
        for w in (o for o in objs if o.get("kind") in WORKLOAD_KINDS):
            ns = meta(w).get("namespace")
            for c in containers(pod_spec(w) or {}):
                if "overlays" in rel.parts and c.get("image", "").split(":")[0] == "candor":
                    problems.append(
                        f"{rel}: {name_of(w)} still uses the placeholder image {c.get('image')!r}"
                    )
                for e in c.get("env") or []:
                    ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                    if ref and ref.get("key") not in cms.get((ns, ref.get("name")), {}):
                        problems.append(
                            f"{rel}: {name_of(w)} env {e.get('name')}: rendered ConfigMap "
                            f"{ref.get('name')} has no key {ref.get('key')}"
                        )
                    if ref and e.get("name", "").endswith(("KAFKA_BROKERS", "CANDOR_KAFKA")):
                        value = cms.get((ns, ref.get("name")), {}).get(ref.get("key"), "")
                        if not all(
                            re.fullmatch(r"[\w.\-\[\]:]+:\d+", b.strip()) for b in value.split(",")
                        ):
                            problems.append(
                                f"{rel}: {name_of(w)} {e.get('name')} = {value!r} is not a "
                                "host:port list"
                            )
            for v in (pod_spec(w) or {}).get("volumes") or []:
                if v.get("configMap") and (ns, v["configMap"].get("name")) not in cms:
                    problems.append(
                        f"{rel}: {name_of(w)} volume {v.get('name')}: rendered ConfigMap "
                        f"{v['configMap'].get('name')} missing"
                    )
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

    checks: list[tuple[str, Callable[[], CheckResult]]] = [
        ("every YAML under deploy/k8s parses", lambda: check_yaml(repo)),
        (
            "every object has apiVersion, kind, metadata.name and a Candor namespace",
            lambda: check_shape(repo),
        ),
        (
            "every kustomization's resources, patches and generator files exist; no Secret in them",
            lambda: check_kustomizations(repo),
        ),
        (
            "built-in objects match the Kubernetes schema",
            lambda: check_schema(repo, args.k8s_version),
        ),
        ("workload selectors match their pod templates", lambda: check_workload_selectors(repo)),
        (
            "every Service selects a Deployment/StatefulSet template",
            lambda: check_service_selectors(repo),
        ),
        ("every Service targetPort is a container port", lambda: check_service_ports(repo)),
        (
            "probes use declared ports, readiness /readyz, liveness /healthz",
            lambda: check_probes(repo),
        ),
        (
            "ServiceMonitors select Services and ports; collector, compactor and dashboards "
            "scraped",
            lambda: check_service_monitors(repo),
        ),
        ("HPA and PodDisruptionBudgets target real workloads", lambda: check_hpa_pdb(repo)),
        (
            "pods are restricted (non-root, read-only root, no caps) with requests and limits",
            lambda: check_pod_security(repo),
        ),
        (
            "table maintenance runs once: compactors' own off, one CronJob runs `maintain` "
            "(Forbid, deadlines)",
            lambda: check_maintenance(repo),
        ),
        (
            "dashboards alone in candor-monitoring, own ServiceAccount and Kafka user, read-only "
            "storage Secret",
            lambda: check_dashboards_isolated(repo),
        ),
        (
            "dashboards NetworkPolicy: ingress 3000 only; egress only Kafka TLS, object store, "
            "webhook, DNS",
            lambda: check_dashboards_network_policy(repo),
        ),
        ("Secrets hold placeholders only and are never applied", lambda: check_secrets(repo)),
        (
            "every referenced Secret and key is described in secrets.example.yaml",
            lambda: check_secret_refs(repo),
        ),
        (
            "every referenced ConfigMap and key exists, values non-empty",
            lambda: check_configmap_refs(repo),
        ),
        (
            "--config / --kafka-config files are mounted; their TLS/CA files and variables are "
            "provided; Kafka over TLS",
            lambda: check_config_mounts(repo),
        ),
        (
            "container commands, flags and CANDOR_* variables are declared by the binaries",
            lambda: check_commands(repo),
        ),
        (
            "the Dockerfile builds and installs candor-collector, candor, candor-dashboards, "
            "with libssl",
            lambda: check_dockerfile(repo),
        ),
        ("every TOML under deploy/ parses", lambda: check_toml_parse(repo)),
        (
            "TOML keys and types are those the Rust config structs (and the readers' Kafka file) "
            "declare",
            lambda: check_toml_keys(repo),
        ),
        (
            "deploy/config/*.toml equal the kustomize base's copies",
            lambda: check_config_copies(repo),
        ),
        (
            "the PrometheusRule equals dashboards/prometheus/candor.rules.yml, regenerated",
            lambda: check_prometheus_rule(repo),
        ),
        ("promtool check rules accepts the PrometheusRule's groups", lambda: check_promtool(repo)),
        (
            "kubectl kustomize renders base and overlays; overlay sets image and Kafka",
            lambda: check_kustomize(repo, args.k8s_version),
        ),
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
            shown = problems[:8] + (
                [f"... and {len(problems) - 8} more"] if len(problems) > 8 else []
            )
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
