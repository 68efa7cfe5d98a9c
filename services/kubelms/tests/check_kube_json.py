#!/usr/bin/python3
"""Checks Kubernetes API documents against the official Kubernetes Python
client's models (Debian's python3-kubernetes), strictly: every key must be a
field of the model (a typo or an invented field is an error), every value must
have the field's type, and required fields must be present.

Used on the stand-in kube-apiserver's recorded data (testdata/) and on every
document it served during a test run, so the adapter is tested against
responses in the shapes kube-apiserver really sends; and by
deploy_manifests_test on every object the kustomize overlays render.

The client is python3-kubernetes 22.6: the Kubernetes 1.22 API, generated
from Kubernetes' OpenAPI spec. Fields newer than that are unknown to it; the
few the manifests use are in NEWER_FIELDS (printed when used). Kinds the
client has no model for (NO_MODEL) are reported as not checked.

  check_kube_json.py FILE_OR_DIR...    exit 0 when every document passes
                                       (.json files, and .yaml/.yml files
                                       with any number of documents)
"""
import inspect
import json
import os
import re
import sys

import yaml
from kubernetes import client

# kind -> model, for the core/v1 documents the stand-in serves.
MODELS = {
    "Node": "V1Node",
    "NodeList": "V1NodeList",
    "Pod": "V1Pod",
    "PodList": "V1PodList",
    "Status": "V1Status",
}

# (apiVersion, kind) -> model, for the objects deploy/k8s renders.
API_MODELS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
}

# Kinds of custom resources the client has no model for: reported as "not
# checked (no model)", neither passed nor failed. The Prometheus Operator's
# (monitoring.coreos.com) and codeco's own CodecoApp (whose CRD schemas
# deploy_manifests_test checks against ACM's parser).
NO_MODEL = {"ServiceMonitor", "PrometheusRule", "CodecoApp"}

# Fields newer than the client's API (1.22) that the manifests use on
# purpose: (model, JSON field) -> (type, Kubernetes version). Anything else
# unknown to a model is an error. Types not in the client are in LOCAL_TYPES.
NEWER_FIELDS = {
    # Probe.grpc: the kubelet's gRPC health check (alpha 1.23, beta 1.24,
    # GA 1.27). No codeco manifest uses it today (their probes exec
    # `codecoctl health`); it is the one newer field a probe may take.
    ("V1Probe", "grpc"): ("GRPCAction", "1.24 (GA 1.27)"),
}

# The int-or-string fields of the 1.22 API (the client types them 'object'):
# an integer or a string, nothing else. Other 'object' fields are free JSON.
INT_OR_STRING = {
    ("V1HTTPGetAction", "port"), ("V1TCPSocketAction", "port"),
    ("V1NetworkPolicyPort", "port"), ("V1ServicePort", "targetPort"),
    ("V1PodDisruptionBudgetSpec", "minAvailable"),
    ("V1PodDisruptionBudgetSpec", "maxUnavailable"),
    ("V1RollingUpdateDeployment", "maxSurge"), ("V1RollingUpdateDeployment", "maxUnavailable"),
    ("V1RollingUpdateDaemonSet", "maxSurge"), ("V1RollingUpdateDaemonSet", "maxUnavailable"),
}

# metrics.k8s.io has no models in the client: its types, from
# k8s.io/metrics/pkg/apis/metrics/v1beta1/types.go.
METRICS = {
    "NodeMetrics": {"kind": "str", "apiVersion": "str", "metadata": "V1ObjectMeta",
                    "timestamp": "datetime", "window": "str", "usage": "dict(str, str)"},
    "PodMetrics": {"kind": "str", "apiVersion": "str", "metadata": "V1ObjectMeta",
                   "timestamp": "datetime", "window": "str", "containers": "list[ContainerMetrics]"},
    "ContainerMetrics": {"name": "str", "usage": "dict(str, str)"},
    "PodMetricsList": {"kind": "str", "apiVersion": "str", "metadata": "V1ListMeta",
                       "items": "list[PodMetrics]"},
}

# Types of NEWER_FIELDS the client does not have (Kubernetes' core/v1 types.go).
LOCAL_TYPES = {
    "GRPCAction": {"port": "int", "service": "str"},
}
LOCAL_REQUIRED = {"GRPCAction": ["port"]}

# NEWER_FIELDS used, for the summary: "model.field (since)" -> count.
NEWER_USED = {}

RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")


def check(value, type_name, path, problems):
    """Appends to `problems` what is wrong with `value` as a `type_name`."""
    if value is None:
        return
    if type_name.startswith("list["):
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check(item, type_name[5:-1], f"{path}[{i}]", problems)
        return
    if type_name.startswith("dict("):
        inner = type_name[5:-1].split(", ", 1)[1]
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            check(v, inner, f"{path}[{k}]", problems)
        return
    if type_name == "str":
        if not isinstance(value, str):
            problems.append(f"{path}: expected a string, got {json.dumps(value)}")
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(f"{path}: expected an integer, got {json.dumps(value)}")
        return
    if type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append(f"{path}: expected a number, got {json.dumps(value)}")
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            problems.append(f"{path}: expected a boolean, got {json.dumps(value)}")
        return
    if type_name == "datetime":
        if not isinstance(value, str) or not RFC3339.match(value):
            problems.append(f"{path}: expected an RFC 3339 time, got {json.dumps(value)}")
        return
    if type_name == "object":
        return
    if type_name == "int-or-string":
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            problems.append(f"{path}: expected an integer or a string, got {json.dumps(value)}")
        return
    if type_name in LOCAL_TYPES:
        if not isinstance(value, dict):
            problems.append(f"{path}: expected an object ({type_name}), got {json.dumps(value)}")
            return
        check_fields(value, LOCAL_TYPES[type_name], None, path, problems)
        for name in LOCAL_REQUIRED.get(type_name, []):
            if name not in value:
                problems.append(f"{path}: {type_name}.{name} is required")
        return
    if type_name in METRICS:
        check_fields(value, METRICS[type_name], {k: k for k in METRICS[type_name]}, path, problems)
        return
    model = getattr(client, type_name, None)
    if model is None:
        problems.append(f"{path}: no model {type_name}")
        return
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object ({type_name}), got {json.dumps(value)}")
        return
    fields = {model.attribute_map[a]: model.openapi_types[a] for a in model.attribute_map}
    for name in fields:
        if (type_name, name) in INT_OR_STRING:
            fields[name] = "int-or-string"
    for (newer_model, name), (newer_type, since) in NEWER_FIELDS.items():
        if newer_model == type_name and name not in fields and name in value:
            fields[name] = newer_type
            key = f"{type_name}.{name} (Kubernetes {since})"
            NEWER_USED[key] = NEWER_USED.get(key, 0) + 1
    check_fields(value, fields, {model.attribute_map[a]: a for a in model.attribute_map}, path,
                 problems)
    for attribute in required(model):
        if model.attribute_map[attribute] not in value:
            problems.append(f"{path}: {type_name}.{model.attribute_map[attribute]} is required")


def required(model, cache={}):
    """The model's required attributes: those its constructor sets even when
    None (optional ones are guarded by `if x is not None:`)."""
    if model not in cache:
        lines = [l.strip() for l in inspect.getsource(model.__init__).splitlines()]
        found = []
        for i, line in enumerate(lines):
            m = re.match(r"^self\.(\w+) = (\w+)$", line)
            if m and m.group(1) == m.group(2) and m.group(1) in model.attribute_map and \
                    not lines[i - 1].startswith(f"if {m.group(1)} is not None"):
                found.append(m.group(1))
        cache[model] = found
    return cache[model]


def check_fields(value, fields, _names, path, problems):
    for key, item in value.items():
        if key not in fields:
            problems.append(f"{path}: unknown field {key!r}")
            continue
        check(item, fields[key], f"{path}.{key}", problems)


def check_document(doc, where, problems, unchecked=None):
    if not isinstance(doc, dict):
        problems.append(f"{where}: not a JSON object")
        return
    if set(doc) == {"type", "object"}:
        if doc["type"] not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"):
            problems.append(f"{where}: unknown watch event type {doc['type']!r}")
        obj = doc["object"]
        if doc["type"] == "BOOKMARK":
            # A bookmark carries only kind, apiVersion and metadata.resourceVersion.
            if set(obj) - {"kind", "apiVersion", "metadata"} or \
                    set(obj.get("metadata", {})) - {"resourceVersion", "annotations"}:
                problems.append(f"{where}: a BOOKMARK with more than its version")
            return
        check_document(obj, f"{where}.object", problems)
        return
    if set(doc) == {"items"}:
        # The kubelet's checkpoint answer (pkg/kubelet/server/server.go).
        check(doc["items"], "list[str]", f"{where}.items", problems)
        return
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if (api_version, kind) in API_MODELS:
        check(doc, API_MODELS[(api_version, kind)], where, problems)
    elif kind in NO_MODEL and unchecked is not None:
        unchecked.append(f"{where}: {api_version} {kind} not checked (no model)")
        return
    elif kind in MODELS and api_version in (None, "v1"):
        check(doc, MODELS[kind], where, problems)
    elif kind in METRICS:
        check(doc, kind, where, problems)
    else:
        problems.append(f"{where}: unknown kind {api_version} {kind!r}")
    if kind == "CustomResourceDefinition":
        return  # its schemas name fields "requests" or "limits" that are no quantities
    for q in quantities(doc):
        if isinstance(q[1], (int, float)) and not isinstance(q[1], bool):
            continue  # a YAML number is a quantity too (`cpu: 1`)
        if not isinstance(q[1], str) or not QUANTITY.match(q[1]):
            problems.append(f"{where}{q[0]}: {q[1]!r} is not a Kubernetes quantity")


def quantities(doc, path=""):
    """(path, value) of every resource quantity in a document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in ("capacity", "allocatable", "requests", "limits", "usage") and isinstance(v, dict):
                for name, q in v.items():
                    yield (f"{path}.{k}[{name}]", q)
            else:
                yield from quantities(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from quantities(v, f"{path}[{i}]")


DOCUMENT_SUFFIXES = (".json", ".yaml", ".yml")


def load(f, problems):
    """The documents of file `f`: one for .json, any number for YAML."""
    with open(f) as handle:
        if f.endswith(".json"):
            try:
                return [json.load(handle)]
            except json.JSONDecodeError as error:
                problems.append(f"{f}: not JSON: {error}")
                return []
        try:
            return [d for d in yaml.safe_load_all(handle) if d is not None]
        except yaml.YAMLError as error:
            problems.append(f"{f}: not YAML: {error}")
            return []


def main(args):
    files = []
    for arg in args:
        if os.path.isdir(arg):
            files += sorted(os.path.join(arg, f) for f in os.listdir(arg)
                            if f.endswith(DOCUMENT_SUFFIXES))
        else:
            files.append(arg)
    if not files:
        print("check_kube_json: no documents given", file=sys.stderr)
        return 2
    problems = []
    unchecked = []
    count = 0
    for f in files:
        docs = load(f, problems)
        for i, doc in enumerate(docs):
            where = os.path.join(os.path.basename(os.path.dirname(f)), os.path.basename(f)) + \
                (f"[{i}]" if len(docs) > 1 else "")
            check_document(doc, where, problems, unchecked)
            count += 1
    for p in problems:
        print(p)
    for u in unchecked:
        print(u)
    for field, uses in sorted(NEWER_USED.items()):
        print(f"newer than the client's API (allowed): {field}, used {uses} times")
    print(f"check_kube_json: {count} documents in {len(files)} files, "
          f"{count - len(unchecked)} checked, {len(unchecked)} not checked (no model), "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
