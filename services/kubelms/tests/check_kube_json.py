#!/usr/bin/python3
"""Checks Kubernetes API documents against the official Kubernetes Python
client's models (Debian's python3-kubernetes), strictly: every key must be a
field of the model (a typo or an invented field is an error), every value must
have the field's type, and required fields must be present.

Used on the stand-in kube-apiserver's recorded data (testdata/) and on every
document it served during a test run, so the adapter is tested against
responses in the shapes kube-apiserver really sends.

  check_kube_json.py FILE_OR_DIR...    exit 0 when every document passes
"""
import inspect
import json
import os
import re
import sys

from kubernetes import client

# kind -> model, for the core/v1 documents the stand-in serves.
MODELS = {
    "Node": "V1Node",
    "NodeList": "V1NodeList",
    "Pod": "V1Pod",
    "PodList": "V1PodList",
    "Status": "V1Status",
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


def check_document(doc, where, problems):
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
    if kind in MODELS:
        check(doc, MODELS[kind], where, problems)
    elif kind in METRICS:
        check(doc, kind, where, problems)
    else:
        problems.append(f"{where}: unknown kind {kind!r}")
    for q in quantities(doc):
        if not QUANTITY.match(q[1]):
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


def main(args):
    files = []
    for arg in args:
        if os.path.isdir(arg):
            files += sorted(os.path.join(arg, f) for f in os.listdir(arg) if f.endswith(".json"))
        else:
            files.append(arg)
    if not files:
        print("check_kube_json: no documents given", file=sys.stderr)
        return 2
    problems = []
    for f in files:
        with open(f) as handle:
            try:
                doc = json.load(handle)
            except json.JSONDecodeError as error:
                problems.append(f"{f}: not JSON: {error}")
                continue
        check_document(doc, os.path.basename(f), problems)
    for p in problems:
        print(p)
    print(f"check_kube_json: {len(files)} documents, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
