"""moto, with a small stand-in for the two EKS APIs moto lacks: add-ons and pod identity associations.

Usage: eks_standin.py PORT. Serves moto's own application on 127.0.0.1:PORT and answers the EKS add-on and
pod-identity routes itself (written from the EKS API reference: paths, bodies, error types); everything else,
including `/moto-api/reset` (which also clears the stand-in), goes to moto. A cluster must exist in moto for
its add-ons and associations, as in EKS. `GET /standin/state` lists every add-on and association it holds, of
clusters that exist or not, so a test can check that nothing was left behind. When moto checks IAM (after
`POST /moto-api/reset-auth`), the stand-in's routes are checked the same way, by moto's own signature and policy
evaluation, so a least-privilege policy is tested on every EKS action the provider calls. Exits when stdin closes.
"""

import io
import json
import os
import re
import sys
import threading
import time
import uuid

from moto import settings
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.authorization import ActionAuthenticatorMixin
from moto.eks.models import eks_backends
from moto.iam.access_control import IAMRequest, IAMRequestBase
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple
from werkzeug.wrappers import Request, Response

threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()

# The bytes of the request this server thread is serving, as the caller sent and signed them.
SENT = threading.local()
_moto_signed_request = IAMRequestBase._create_aws_request


def _signed_request_as_sent(self):
    """moto 5.2.5 checks a signature over the request as it re-serialises it: a form body re-encoded (spaces as
    `+` where the caller sent `%20`) and a bodiless GET or DELETE over its headers, so most EC2 writes and every
    EKS or EFS read fail the check. Check it over the bytes the caller sent instead; the rest is moto's."""
    self._data = {}
    self._body = getattr(SENT, "body", self._body)
    return _moto_signed_request(self)


IAMRequestBase._create_aws_request = _signed_request_as_sent

LOCK = threading.Lock()
ADDONS = {}  # (region, cluster, addon name) -> addon
ASSOCIATIONS = {}  # (region, cluster, association id) -> association

ADDON = re.compile(r"^/clusters/(?P<cluster>[^/]+)/addons(?:/(?P<addon>[^/]+))?(?P<update>/update)?$")
ASSOCIATION = re.compile(r"^/clusters/(?P<cluster>[^/]+)/pod-identity-associations(?:/(?P<id>[^/]+))?$")
# A stand-in default per add-on, as DescribeAddonVersions would name it for the cluster's version.
DEFAULT_VERSIONS = {
    "vpc-cni": "v1.20.0-eksbuild.1",
    "kube-proxy": "v1.34.0-eksbuild.2",
    "coredns": "v1.12.3-eksbuild.1",
    "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
    "aws-efs-csi-driver": "v2.1.11-eksbuild.1",
}


def error(status, kind, message):
    return Response(json.dumps({"message": message}), status=status,
                    headers={"x-amzn-ErrorType": kind, "Content-Type": "application/json"})


def ok(body):
    return Response(json.dumps(body), status=200, headers={"Content-Type": "application/json"})


def action_of(request, addon, association):
    """The EKS API action a stand-in route serves, as IAM names it."""
    if addon:
        one, kind = addon.group("addon"), "Addon"
        if request.method == "POST" and addon.group("update"):
            return "UpdateAddon"
    else:
        one, kind = association.group("id"), "PodIdentityAssociation"
    if one is None:
        return {"GET": f"List{kind}s", "POST": f"Create{kind}"}.get(request.method, "Unknown")
    return {"GET": f"Describe{kind}", "POST": f"Update{kind}", "DELETE": f"Delete{kind}"}.get(
        request.method, "Unknown")


def refused(request, action):
    """moto's own IAM check of a stand-in request, once moto checks IAM: a refusal as EKS answers it, or None."""
    if ActionAuthenticatorMixin.request_count < settings.INITIAL_NO_AUTH_ACTION_COUNT:
        return None
    body = SENT.body
    try:
        iam = IAMRequest(account_id=DEFAULT_ACCOUNT_ID, method=request.method, path=request.environ.get("RAW_URI") or request.full_path.rstrip("?"),
                         data={}, body=body, headers=dict(request.headers), action=action)
        iam.check_signature()
        iam.check_action_permitted("*")
    except Exception as refusal:  # moto raises its own HTTP errors; EKS answers 403 with a type header
        message = getattr(refusal, "message", None) or getattr(refusal, "description", None) or str(refusal)
        return error(403, "AccessDeniedException", f"eks:{action}: {message}")
    return None


def region_of(request):
    match = re.search(r"Credential=[^/]+/[^/]+/([^/]+)/eks/", request.headers.get("Authorization", ""))
    return match.group(1) if match else "us-east-1"


def cluster_exists(region, name):
    return name in eks_backends[DEFAULT_ACCOUNT_ID][region].clusters


def addon_route(request, region, cluster, name, update):
    key = (region, cluster, name)
    body = request.get_json(silent=True) or {}
    if request.method == "GET" and name is None:
        return ok({"addons": sorted(n for (r, c, n) in ADDONS if (r, c) == (region, cluster))})
    if request.method == "POST" and name is None:
        name = body.get("addonName") or ""
        if not name:
            return error(400, "InvalidParameterException", "addonName is required")
        if name not in DEFAULT_VERSIONS:
            return error(400, "InvalidParameterException", f"Addon {name} specified is not supported")
        version = body.get("addonVersion") or DEFAULT_VERSIONS[name]
        if not version.startswith("v"):
            return error(400, "InvalidParameterException", f"Addon version {version} is not supported")
        if (region, cluster, name) in ADDONS:
            return error(409, "ResourceInUseException", f"Addon already exists: {name}")
        now = time.time()
        addon = {
            "addonName": name, "clusterName": cluster, "status": "ACTIVE", "addonVersion": version,
            "health": {"issues": []}, "createdAt": now, "modifiedAt": now,
            "addonArn": f"arn:aws:eks:{region}:{DEFAULT_ACCOUNT_ID}:addon/{cluster}/{name}/{uuid.uuid4()}",
            "tags": body.get("tags") or {},
        }
        if body.get("configurationValues"):
            addon["configurationValues"] = body["configurationValues"]
        ADDONS[(region, cluster, name)] = addon
        return ok({"addon": addon})
    addon = ADDONS.get(key)
    if addon is None:
        return error(404, "ResourceNotFoundException", f"No addon: {name} found in cluster: {cluster}")
    if request.method == "GET":
        return ok({"addon": addon})
    if request.method == "POST" and update:
        if body.get("addonVersion"):
            addon["addonVersion"] = body["addonVersion"]
        if "configurationValues" in body:
            addon["configurationValues"] = body["configurationValues"]
        addon["modifiedAt"] = time.time()
        return ok({"update": {"id": str(uuid.uuid4()), "status": "Successful", "type": "AddonUpdate"}})
    if request.method == "DELETE":
        del ADDONS[key]
        return ok({"addon": dict(addon, status="DELETING")})
    return error(405, "InvalidRequestException", "method not allowed")


def association_route(request, region, cluster, association_id):
    body = request.get_json(silent=True) or {}
    if request.method == "GET" and association_id is None:
        namespace = request.args.get("namespace")
        account = request.args.get("serviceAccount")
        found = [
            {k: a[k] for k in ("clusterName", "namespace", "serviceAccount", "associationArn", "associationId")}
            for (r, c, _), a in sorted(ASSOCIATIONS.items())
            if (r, c) == (region, cluster)
            and namespace in (None, a["namespace"]) and account in (None, a["serviceAccount"])
        ]
        return ok({"associations": found})
    if request.method == "POST" and association_id is None:
        for field in ("namespace", "serviceAccount", "roleArn"):
            if not body.get(field):
                return error(400, "InvalidParameterException", f"{field} is required")
        if not re.match(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$", body["roleArn"]):
            return error(400, "InvalidParameterException", f"roleArn {body['roleArn']} is not a valid role ARN")
        for (r, c, _), a in ASSOCIATIONS.items():
            if (r, c) == (region, cluster) and (a["namespace"], a["serviceAccount"]) == (
                    body["namespace"], body["serviceAccount"]):
                return error(409, "ResourceInUseException", "Association already exists")
        new_id = "a-" + uuid.uuid4().hex[:17]
        now = time.time()
        association = {
            "clusterName": cluster, "namespace": body["namespace"], "serviceAccount": body["serviceAccount"],
            "roleArn": body["roleArn"], "associationId": new_id, "createdAt": now, "modifiedAt": now,
            "associationArn": f"arn:aws:eks:{region}:{DEFAULT_ACCOUNT_ID}:podidentityassociation/{cluster}/{new_id}",
            "tags": body.get("tags") or {},
        }
        ASSOCIATIONS[(region, cluster, new_id)] = association
        return ok({"association": association})
    key = (region, cluster, association_id)
    association = ASSOCIATIONS.get(key)
    if association is None:
        return error(404, "ResourceNotFoundException", f"No association {association_id} in cluster {cluster}")
    if request.method == "GET":
        return ok({"association": association})
    if request.method == "POST":
        if body.get("roleArn"):
            association["roleArn"] = body["roleArn"]
        association["modifiedAt"] = time.time()
        return ok({"association": association})
    if request.method == "DELETE":
        del ASSOCIATIONS[key]
        return ok({"association": association})
    return error(405, "InvalidRequestException", "method not allowed")


def json_refusals(app, environ, start_response):
    """moto answers an IAM refusal in its XML form whatever the service; EKS and EFS speak JSON, naming the error
    in `x-amzn-ErrorType`, so their SDKs read moto's as an unknown error. Answer as they do."""
    captured = {}

    def capture(status, headers, exc_info=None):
        captured["status"], captured["headers"] = status, headers
        return lambda data: None

    body = b"".join(app(environ, capture))
    if captured["status"].startswith("403") and body.lstrip().startswith(b"<"):
        code = re.search(rb"<Code>([^<]*)</Code>", body)
        message = re.search(rb"<Message>([^<]*)</Message>", body)
        code = code.group(1).decode() if code else "AccessDenied"
        kind = "AccessDeniedException" if code == "AccessDenied" else code
        return error(403, kind, message.group(1).decode() if message else code)(environ, start_response)
    start_response(captured["status"], captured["headers"])
    return [body]


class StandIn:
    def __init__(self, moto):
        self.moto = moto

    def __call__(self, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        SENT.body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(SENT.body)
        request = Request(environ)
        path = request.path
        if path == "/standin/state":
            with LOCK:
                state = {
                    "addons": [list(key) for key in sorted(ADDONS)],
                    "associations": [
                        [r, c, a["namespace"], a["serviceAccount"], a["associationId"]]
                        for (r, c, _), a in sorted(ASSOCIATIONS.items())
                    ],
                }
            return ok(state)(environ, start_response)
        if path == "/moto-api/reset":
            with LOCK:
                ADDONS.clear()
                ASSOCIATIONS.clear()
            return self.moto(environ, start_response)
        addon = ADDON.match(path)
        association = ASSOCIATION.match(path)
        if not (addon or association):
            if path.startswith("/clusters") or path.startswith("/2015-02-01/"):
                return json_refusals(self.moto, environ, start_response)
            return self.moto(environ, start_response)
        denied = refused(request, action_of(request, addon, association))
        if denied is not None:
            return denied(environ, start_response)
        region = region_of(request)
        cluster = (addon or association).group("cluster")
        with LOCK:
            if not cluster_exists(region, cluster):
                response = error(404, "ResourceNotFoundException", f"No cluster found for name: {cluster}.")
            elif addon:
                response = addon_route(request, region, cluster, addon.group("addon"), addon.group("update"))
            else:
                response = association_route(request, region, cluster, association.group("id"))
        return response(environ, start_response)


if __name__ == "__main__":
    port = int(sys.argv[1])
    os.environ.setdefault("MOTO_PORT", str(port))
    run_simple("127.0.0.1", port, StandIn(DomainDispatcherApplication(create_backend_app)), threaded=True)
