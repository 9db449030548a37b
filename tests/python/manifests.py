"""What a Kubernetes API server would say about a composed manifest, without an API server.

Core kinds are checked against the strict JSON Schemas shipped in the PyPI package `kubernetes-validate`
(unknown fields rejected, as `kubectl apply --validate=strict` does). Custom kinds (LeaderWorkerSet, Grove,
KAI, ModelExpress) are checked against the upstream CRDs vendored in `tests/crds/`, after rewriting the
OpenAPI 3.0 dialect a CRD uses into JSON Schema, plus a walk that reports fields the CRD does not declare
(the API server would silently prune them, so a misspelt field would be lost without a word).

Not covered: CEL rules (`x-kubernetes-validations`), defaulting and admission webhooks.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator

import jsonschema
import yaml
from referencing import Registry, Resource

# libyaml parses the multi-megabyte CRDs ten times faster than the pure-Python loader.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

REPO_ROOT = Path(__file__).resolve().parents[2]

# The oldest Kubernetes minor the fleet runs: DRA (`resource.k8s.io/v1`) went GA in 1.34, and a manifest must be
# accepted by every cluster version we support, so the oldest schema is the one that matters.
KUBERNETES_VERSION = "1.34.0"
_SCHEMA_DIR = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META = f"{_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# provider-kubernetes wraps arbitrary manifests in an Object (cluster-scoped and namespaced API groups).
PROVIDER_KUBERNETES_GROUPS = ("kubernetes.crossplane.io", "kubernetes.m.crossplane.io")

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Kinds whose names become DNS labels (Service names are host names in cluster DNS).
_DNS_1035_NAMED_KINDS = {("", "Service")}


def crd_dir() -> Path:
    """The upstream CRDs, vendored verbatim (tests/crds/SOURCES.md says where each came from)."""
    return REPO_ROOT / "tests" / "crds"


# ---------------------------------------------------------------------------------------------------------------
# Public helpers


def validate(obj: dict) -> list[str]:
    """Human-readable reasons the API server would refuse `obj` (or silently drop part of it); empty if none."""
    if not isinstance(obj, dict):
        return [f"(object): a manifest must be a mapping, got {type(obj).__name__}"]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        return ["(object): apiVersion and kind must both be set to non-empty strings"]
    group, _, version = api_version.rpartition("/")
    errors = _metadata_errors(obj, group, kind)
    core = _core_validator(group, version, kind)
    if core is not None:
        return errors + _schema_errors(core, obj)
    crds = _crds_for(group, kind)
    if not crds:
        return errors + [f"(object): no schema is known for {kind} in {api_version!r} (neither a Kubernetes "
                         f"{KUBERNETES_VERSION} kind nor a CRD in {crd_dir()})"]
    served = [crd for crd in crds if crd.version == version]
    if not served:
        versions = sorted({crd.version for crd in crds})
        return errors + [f"apiVersion: {kind} is served as {', '.join(f'{group}/{v}' for v in versions)}, "
                         f"not {api_version}"]
    for crd in served:
        # Every upstream release we support must accept the object; name the release when there are several.
        prefix = f"[{crd.source}] " if len(served) > 1 else ""
        errors += [prefix + e for e in crd.errors(obj)]
    return errors


def assert_valid(obj: dict) -> None:
    errors = validate(obj)
    assert not errors, f"{describe(obj)} would be refused:\n  " + "\n  ".join(errors)


def describe(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '<no kind>')} {namespace}{name}"


def is_provider_kubernetes_object(obj: dict) -> bool:
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return obj.get("kind") == "Object" and group in PROVIDER_KUBERNETES_GROUPS


def unwrap(obj: dict) -> dict:
    """The manifest a provider-kubernetes `Object` carries in `spec.forProvider.manifest`."""
    if not is_provider_kubernetes_object(obj):
        raise ValueError(f"{describe(obj)} is not a provider-kubernetes Object")
    manifest = ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest")
    if not isinstance(manifest, dict):
        raise ValueError(f"{describe(obj)} has no spec.forProvider.manifest mapping")
    return manifest


def unwrap_all(objs: Iterable[dict]) -> list[dict]:
    """Manifests as they reach the target cluster: Objects unwrapped, anything else as it is."""
    return [unwrap(o) if is_provider_kubernetes_object(o) else o for o in objs]


# ---------------------------------------------------------------------------------------------------------------
# Core kinds: kubernetes-validate's strict schemas


def _schema_file(name: str) -> Any:
    path = resources.files("kubernetes_validate").joinpath(f"{_SCHEMA_DIR}/{name}")
    if not path.is_file():
        return None
    return json.loads(path.read_text())


@functools.cache
def _core_registry() -> Registry:
    definitions = _schema_file("_definitions.json")
    if definitions is None:
        raise RuntimeError(f"kubernetes-validate has no schemas for Kubernetes {KUBERNETES_VERSION}")
    return Resource.from_contents(definitions) @ Registry()


@functools.cache
def _core_validator(group: str, version: str, kind: str) -> jsonschema.protocols.Validator | None:
    # kubernetes-validate names files <kind>-<first label of the group>-<version>.json ("v1" alone for core).
    prefix = f"{group.split('.')[0]}-" if group else ""
    schema = _schema_file(f"{kind.lower()}-{prefix}{version}.json")
    if schema is None:
        return None
    # The same directory holds sub-types (DeploymentSpec...) and groups share first labels: accept only a
    # schema that declares exactly this group/version/kind as a top-level object.
    declared = schema.get("x-kubernetes-group-version-kind") or []
    if {"group": group, "version": version, "kind": kind} not in declared:
        return None
    return jsonschema.Draft202012Validator(schema, registry=_core_registry())


@functools.cache
def _object_meta_validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator({"$ref": _OBJECT_META}, registry=_core_registry())


def _metadata_errors(obj: dict, group: str, kind: str) -> list[str]:
    """Name and label syntax (the schemas leave these to the API server's Go validation)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [] if meta is None else ["metadata: must be a mapping"]
    errors = []
    name = meta.get("name")
    if isinstance(name, str):
        if (group, kind) in _DNS_1035_NAMED_KINDS:
            if len(name) > 63 or not _DNS_1035_LABEL.match(name):
                errors.append(f"metadata.name: {name!r} is not a DNS-1035 label (lower-case alphanumerics and "
                              "'-', starting with a letter, at most 63 characters)")
        elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            errors.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = str(key).rpartition("/")
        if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or len(label) > 63 \
                or not _LABEL_NAME.match(label):
            errors.append(f"metadata.labels: key {key!r} is not a valid label key")
        if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME.match(value)):
            errors.append(f"metadata.labels.{key}: value {value!r} is not a valid label value")
    return errors


# ---------------------------------------------------------------------------------------------------------------
# Custom kinds: upstream CRDs


class _CrdVersion:
    def __init__(self, source: str, group: str, kind: str, version: str, scope: str, schema: dict):
        self.source, self.group, self.kind, self.version, self.scope = source, group, kind, version, scope
        self.openapi = schema

    @functools.cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        return jsonschema.Draft7Validator(_to_json_schema(self.openapi))

    def errors(self, obj: dict) -> list[str]:
        errors = _schema_errors(self.validator, obj)
        errors += list(_undeclared_fields(obj, self.openapi, "", root=True))
        if isinstance(obj.get("metadata"), dict):
            errors += _schema_errors(_object_meta_validator(), obj["metadata"], "metadata")
            if self.scope == "Cluster" and obj["metadata"].get("namespace"):
                errors.append(f"metadata.namespace: {self.kind} is cluster-scoped; it cannot have a namespace")
        return errors


@functools.cache
def _all_crds() -> tuple[_CrdVersion, ...]:
    found = []
    # The fleet-routing CRDs sit one directory per project and release (tests/crds/routing/SOURCES.md); every
    # release vendored there must accept what is composed for it.
    # Workload-cluster releases: top-level files, routing/<project>/<release>/, and <project>/<release>/ for the
    # cluster gateway's certificates (cert-manager, trust-manager) and the gateways' MetalLB pools.
    paths = (sorted(crd_dir().glob("*.yaml")) + sorted(crd_dir().glob("routing/*/*/*.yaml"))
             + sorted(crd_dir().glob("cert-manager/*/*.yaml")) + sorted(crd_dir().glob("trust-manager/*/*.yaml"))
             + sorted(crd_dir().glob("prometheus-operator/*/*.yaml")) + sorted(crd_dir().glob("keda/*/*.yaml"))
             + sorted(crd_dir().glob("metallb/*/*.yaml")))
    for path in paths:
        for doc in yaml.load_all(path.read_text(), Loader=_YAML_LOADER):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if version.get("served", True) and "schema" in version:
                    found.append(_CrdVersion(str(path.relative_to(crd_dir())), spec["group"], spec["names"]["kind"], version["name"],
                                             spec.get("scope", "Namespaced"),
                                             version["schema"]["openAPIV3Schema"]))
    return tuple(found)


def _crds_for(group: str, kind: str) -> list[_CrdVersion]:
    return [crd for crd in _all_crds() if crd.group == group and crd.kind == kind]


# Keywords whose value is a schema, a list of schemas, or a map of name → schema.
_SUBSCHEMA = ("items", "additionalProperties", "not")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf")
_SUBSCHEMA_MAPS = ("properties", "patternProperties")


def _to_json_schema(node: Any) -> Any:
    """Rewrites an OpenAPI 3.0 structural schema into JSON Schema (draft 7) with the API server's meaning."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in _SUBSCHEMA:
            out[key] = _to_json_schema(value)
        elif key in _SUBSCHEMA_LISTS:
            out[key] = [_to_json_schema(v) for v in value]
        elif key in _SUBSCHEMA_MAPS:
            out[key] = {name: _to_json_schema(v) for name, v in value.items()}
        elif not key.startswith("x-kubernetes-") and key != "nullable":
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.get(bound) is True and limit in out:
            out[bound] = out.pop(limit)
        elif out.get(bound) is False:
            out.pop(bound)
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def _undeclared_fields(value: Any, schema: dict, path: str, root: bool = False,
                       embedded: bool = False) -> Iterator[str]:
    """Fields the API server would prune because the structural schema does not declare them."""
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _undeclared_fields(item, schema["items"], f"{path}[{i}]",
                                          embedded=bool(schema["items"].get("x-kubernetes-embedded-resource")))
        return
    if not isinstance(value, dict):
        return
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    keeps_unknown = schema.get("x-kubernetes-preserve-unknown-fields") is True or additional is True
    # apiVersion, kind and metadata are implied at the root and in embedded resources.
    implied = {"apiVersion", "kind", "metadata"} if root or embedded else set()
    for key, child in value.items():
        child_path = f"{path}.{key}" if path else str(key)
        sub = properties.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            if not (root and key == "metadata"):
                yield from _undeclared_fields(child, sub, child_path,
                                              embedded=bool(sub.get("x-kubernetes-embedded-resource")))
        elif not keeps_unknown and key not in implied:
            yield f"{child_path}: field is not declared in the schema (the API server would drop it)"


# ---------------------------------------------------------------------------------------------------------------
# Error formatting


def _format_path(parts: Iterable[Any], base: str = "") -> str:
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out or "(object)"


def _schema_errors(validator: jsonschema.protocols.Validator, instance: Any, base: str = "") -> list[str]:
    errors = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            declared = set((error.schema.get("properties") or {}).keys())
            for extra in sorted(set(error.instance) - declared):
                path = _format_path([*error.absolute_path, extra], base)
                errors.append(f"{path}: unknown field")
            continue
        errors.append(f"{_format_path(error.absolute_path, base)}: {error.message}")
    return errors
