"""Starts the exporter's container of rendered pods the way a kubelet does, and checks that
it serves and that its probes answer as the kubelet expects. Used by scripts/check-deploy;
needs root (mount and network namespaces) and the exporter binary.

    python3 scripts/kubelet.py EXPORTER_BIN RENDERED[:OPTION,...] ...

RENDERED is a manifest file (helm template output or deploy/kubernetes/*.yaml). Options:
web=tls, web=tls+basic: the stand-in web config file has tls_server_config and/or
basic_auth_users (the chart cannot know what the user's Secret holds);
services=FILE+FILE: the Services of these manifests live in the same namespace too (their
service-link variables reach the pod); links=on: as if the pod left enableServiceLinks on
(what a user who removes `enableServiceLinks: false` gets); expect=startup-failure: the pod's
startup probe is meant never to pass (a probe of a path the exporter does not serve): the
run passes when the kubelet would restart the container for it, before running any other
probe.

For each Deployment, StatefulSet, DaemonSet or Pod with a container named
kafka-lso-exporter, in a mount and network namespace of its own (all pods at once):

- the image as the Dockerfile builds it: its ENTRYPOINT, USER and PATH, the binary at the
  path it is copied to, Debian's /usr and /etc beneath it;
- the environment a kubelet gives the container: HOSTNAME, the image's PATH, the
  `kubernetes` Service's variables, the service-link variables of every Service rendered
  in the namespace unless enableServiceLinks is false, envFrom, env with $(VAR) expanded,
  the downward API (fieldRef, resourceFieldRef), Secret and ConfigMap keys (Secrets as
  stand-ins);
- every volume at its mountPath (subPath too): ConfigMap and Secret keys in the atomic
  writer's layout (key -> ..data/key -> ..<timestamp>/key), read-only, with their modes and
  the fsGroup; projected service-account tokens, downward API files, emptyDir writable;
  the service-account token unless automountServiceAccountToken is false;
- the user and group of the pod's and the container's securityContext (runAsNonRoot
  refuses uid 0 as the kubelet does), supplemental groups and fsGroup, no new privileges,
  no capabilities, readOnlyRootFilesystem;
- a pod IP on the loopback of its own network namespace: nothing else is reachable, so
  every cluster is down (kafka_lso_exporter_up 0) and a replica of a coordination group
  reaches no coordinator.

Then the probes on the kubelet's schedule (initialDelaySeconds from the container's start,
periodSeconds, timeoutSeconds, failureThreshold): the startup probe alone until it passes
(the kubelet runs no liveness or readiness probe before), then liveness and readiness, each
first due at the later of its initial delay and the startup probe's success; httpGet to the
pod IP with the kubelet's headers, 200-399 a success, HTTPS without verification; tcpSocket
a connect. A liveness probe failing failureThreshold times in a row, a startup probe running
out, or readiness not reached within 60 s is a failure. /metrics is scraped as the pod's
ServiceMonitor, PodMonitor or annotations say. SIGTERM: the process exits 0 within
terminationGracePeriodSeconds. The process's log must hold no panic and no refused write.

Options for pods started from another project's manifests (a drop-in for kafka_exporter):
container=NAME: the exporter's container has that name; net=host: the pod shares the
host's network namespace (as with hostNetwork: true) and its IP is 127.0.0.1, so it reaches
the brokers on loopback and Prometheus reaches it; hosts=NAME+NAME: the cluster DNS
answers 127.0.0.1 for these names (Services whose port a test forwards to a broker);
while=PATH: once the pod is ready and scraped, PATH runs (with METRICS_URL, POD_IP and
POD_NAME in its environment) before SIGTERM, and its failure is the pod's. Secrets rendered with the
manifests (or appended to them, as a user creates them) are mounted with their data; other
Secrets are stand-ins. Files the Dockerfile copies beside the binary (IMAGE_FILES) are
where it copies them.
"""
import base64
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import yaml

CONTAINER = "kafka-lso-exporter"
NAMESPACE = "monitoring"
POD_IP = "10.244.1.7"
# The Dockerfile's COPY sources other than the binary and the licences, by the path the
# release's build context gives them, from their place in the repository.
IMAGE_FILES = {"kafka_exporter_run.sh": "deploy/strimzi/kafka_exporter_run.sh"}
HOST_IP = "192.168.49.2"
NODE = "node-1"
CLUSTER_IP = "10.96.0.12"
KUBE_PROBE = "kube-probe/1.33"
READY_WITHIN = 60.0
SCRAPED_WITHIN = 45.0
# The hash of "changeme" (docs/web-config.md).
BCRYPT_CHANGEME = "$2b$10$ByvS7b1gz/BLrB4Py0xMwObVKeSylhtf7jhbeESoh/RGbvBhK2q5i"
# The keys of the Secrets the manifests mount whole (without items), as their comments and
# values.yaml tell users to create them; for other Secrets mounted whole, the files the pod
# names under their mount path.
SECRET_KEYS = {
    "kafka-lso-exporter-tls": ["ca.crt"],
    "kafka-lso-exporter-web": ["web.yml", "web-config.yml", "tls.crt", "tls.key", "ca.crt"],
}
# The ConfigMaps the values files mount but leave to the user to create, as their comments
# describe them.
CONFIG_MAP_DATA = {
    "krb5-conf": {"krb5.conf": "[libdefaults]\n  default_realm = EXAMPLE.COM\n"
                               "  dns_lookup_kdc = false\n"
                               "[realms]\n  EXAMPLE.COM = {\n    kdc = kdc.example.com:88\n  }\n"},
}
STARTUP_FAILED = "startupProbe failed"
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                  "successThreshold": 1, "failureThreshold": 3}
LIMIT_FACTORS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def image():
    """The runtime stage of the Dockerfile: entrypoint, uid, gid, where the binary goes."""
    with open("Dockerfile") as f:
        stage = f.read().split("\nFROM ")[-1]
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (\[.*\])", stage, re.M).group(1))
    uid, _, gid = re.search(r"^USER (\S+)", stage, re.M).group(1).partition(":")
    # The binary from a build stage, or from the release's build context.
    binary = re.search(r"^COPY (?:--from=\S+ )?\S*/kafka-lso-exporter (\S+)$", stage, re.M).group(1)
    return entrypoint, int(uid), int(gid or uid), binary


def image_files():
    """{path in the image: file in the repository} of the Dockerfile's other COPY lines."""
    with open("Dockerfile") as f:
        stage = f.read().split("\nFROM ")[-1]
    out = {}
    for source, target in re.findall(r"^COPY (\S+) (/\S+)$", stage, re.M):
        if source in IMAGE_FILES:
            out[target] = IMAGE_FILES[source]
    return out


# -- what the kubelet computes ----------------------------------------------------------


def service_link_env(services):
    """The docker-links variables a kubelet sets for each Service (not headless)."""
    env = {}
    for service in services:
        spec = service.get("spec", {})
        ports = spec.get("ports", [])
        if not ports or spec.get("clusterIP") == "None":
            continue
        name = service["metadata"]["name"].upper().replace("-", "_")
        host = spec.get("clusterIP") or CLUSTER_IP
        env[f"{name}_SERVICE_HOST"] = host
        env[f"{name}_SERVICE_PORT"] = str(ports[0]["port"])
        env[f"{name}_PORT"] = f"{ports[0].get('protocol', 'TCP').lower()}://{host}:{ports[0]['port']}"
        for port in ports:
            protocol = port.get("protocol", "TCP")
            base = f"{name}_PORT_{port['port']}_{protocol}"
            env[base] = f"{protocol.lower()}://{host}:{port['port']}"
            env[f"{base}_PROTO"] = protocol.lower()
            env[f"{base}_PORT"] = str(port["port"])
            env[f"{base}_ADDR"] = host
            if port.get("name"):
                env[f"{name}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
    return env


KUBERNETES_SERVICE = {"metadata": {"name": "kubernetes"},
                      "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]}}


class Pod:
    def __init__(self, objects, workload, options):
        self.objects = objects
        self.workload = workload
        self.options = options
        template = workload if workload["kind"] == "Pod" else workload["spec"]["template"]
        self.meta = template.get("metadata", {})
        self.spec = template["spec"]
        self.container = next(c for c in self.spec["containers"] if c["name"] == options.get("container", CONTAINER))
        self.name = f"{workload['metadata']['name']}-7d9f8b6c4-x2m9q"
        self.title = f"{workload['kind']}/{workload['metadata']['name']}"

    def find(self, kind, name):
        return next((d for d in self.objects if d.get("kind") == kind
                     and d.get("metadata", {}).get("name") == name), None)

    def field(self, path):
        labels, annotations = self.meta.get("labels", {}), self.meta.get("annotations", {})
        match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if match:
            return (labels if match.group(1) == "labels" else annotations).get(match.group(2), "")
        return {
            "metadata.name": self.name, "metadata.namespace": NAMESPACE,
            "metadata.uid": "3f1c2a9e-5b7d-4c8e-9a1f-2b3c4d5e6f70",
            "spec.nodeName": NODE, "spec.serviceAccountName": self.service_account(),
            "status.hostIP": HOST_IP, "status.hostIPs": HOST_IP,
            "status.podIP": POD_IP, "status.podIPs": POD_IP,
        }[path]

    def service_account(self):
        return self.spec.get("serviceAccountName") or "default"

    def resource(self, ref):
        resources = self.container.get("resources", {})
        kind, _, what = ref["resource"].partition(".")
        value = str(resources.get(kind, {}).get(what) or resources.get("limits", {}).get(what) or "0")
        number, unit = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", value).groups()
        if what == "cpu":
            cores = float(number) / 1000 if unit == "m" else float(number)
            divisor = ref.get("divisor", "1")
            divisor = float(divisor[:-1]) / 1000 if str(divisor).endswith("m") else float(divisor)
            return str(int(-(-cores // divisor)))
        quantity = float(number) * LIMIT_FACTORS[unit]
        divisor = str(ref.get("divisor", "1"))
        d_number, d_unit = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", divisor).groups()
        return str(int(-(-quantity // (float(d_number) * LIMIT_FACTORS[d_unit]))))

    def rendered_secret(self, name):
        """{key: bytes} of a Secret rendered with the manifests, or None."""
        secret = self.find("Secret", name)
        if secret is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (secret.get("stringData") or {}).items()})
        return data

    def secret_value(self, name, key):
        rendered = self.rendered_secret(name)
        if rendered is not None:
            if key not in rendered:
                raise Problem(f"Secret {name} has no key {key}")
            return rendered[key].decode()
        return self.stand_in(name, key).decode()

    def config_map_value(self, name, key):
        config_map = self.find("ConfigMap", name) or ({"data": CONFIG_MAP_DATA[name]} if name in CONFIG_MAP_DATA else None)
        if config_map is None or key not in config_map.get("data", {}):
            raise Problem(f"ConfigMap {name} key {key} is not rendered")
        return config_map["data"][key]

    def env(self, service_links=None):
        """The container's environment in the kubelet's order; service_links True: as if
        enableServiceLinks were on."""
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOSTNAME": self.name}
        services = [KUBERNETES_SERVICE]
        if service_links is None and self.options.get("links") == "on":
            service_links = True
        if service_links or service_links is None and self.spec.get("enableServiceLinks", True) is not False:
            services += [d for d in self.objects if d.get("kind") == "Service"]
            for other in filter(None, self.options.get("services", "").split("+")):
                services += [d for d in docs(other) if d.get("kind") == "Service"]
        env.update(service_link_env(services))
        for source in self.container.get("envFrom", []):
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                data = (self.find("ConfigMap", source["configMapRef"]["name"]) or {}).get("data", {})
            else:
                secret = source["secretRef"]["name"]
                rendered = self.rendered_secret(secret)
                data = {k: v.decode() for k, v in rendered.items()} if rendered is not None else \
                    {k: self.secret_value(secret, k) for k in SECRET_KEYS.get(secret, [])}
            env.update({prefix + k: v for k, v in data.items()})
        for entry in self.container.get("env", []):
            if "value" in entry:
                env[entry["name"]] = expand(str(entry["value"]), env)
                continue
            source = entry.get("valueFrom", {})
            if "fieldRef" in source:
                env[entry["name"]] = self.field(source["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in source:
                env[entry["name"]] = self.resource(source["resourceFieldRef"])
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                env[entry["name"]] = self.secret_value(ref["name"], ref["key"])
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                env[entry["name"]] = self.config_map_value(ref["name"], ref["key"])
            else:
                raise Problem(f"env {entry['name']}: unsupported source {source}")
        env.setdefault("HOME", "/")
        return env

    def argv(self, env):
        entrypoint, _, _, _ = image()
        command = self.container.get("command") or entrypoint
        args = self.container.get("args", [] if "command" in self.container else [])
        return [expand(a, env) for a in command + args]

    def user(self):
        """uid, gid, supplemental groups, fsGroup as the runtime applies them."""
        _, image_uid, image_gid, _ = image()
        pod, container = self.spec.get("securityContext", {}), self.container.get("securityContext", {})
        uid = container.get("runAsUser", pod.get("runAsUser", image_uid))
        gid = container.get("runAsGroup", pod.get("runAsGroup", image_gid if "runAsUser" not in container and "runAsUser" not in pod else 0))
        if container.get("runAsNonRoot", pod.get("runAsNonRoot")) and uid == 0:
            raise Problem("runAsNonRoot with uid 0: the kubelet refuses to start the container")
        fs_group = pod.get("fsGroup")
        groups = list(pod.get("supplementalGroups", []))
        if fs_group is not None:
            groups.append(fs_group)
        return uid, gid, groups, fs_group

    def stand_in(self, secret, key):
        """A Secret key's content as a user would create it."""
        if key == self.web_config_key(secret):
            web = self.options.get("web", "")
            text = ""
            if "tls" in web:
                text += "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
            if "basic" in web:
                text += f"basic_auth_users:\n  prometheus: {BCRYPT_CHANGEME}\n"
            return (text or "{}\n").encode()
        if key.endswith((".crt", ".pem")):
            return self.tls()[0]
        if key.endswith(".key"):
            return self.tls()[1]
        return f"stand-in-{key}\n".encode()

    def web_config_key(self, secret):
        for arg in self.container.get("args", []):
            if arg.startswith("--web.config.file="):
                path = arg.split("=", 1)[1]
                for mount, volume in self.mounts():
                    if volume.get("secret", {}).get("secretName") == secret and \
                            path.startswith(mount["mountPath"].rstrip("/") + "/"):
                        return path[len(mount["mountPath"].rstrip("/")) + 1:]
        return None

    def tls(self):
        if not hasattr(self, "_tls"):
            with tempfile.TemporaryDirectory() as scratch:
                subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                "-subj", "/CN=kafka-lso-exporter", "-addext",
                                f"subjectAltName=DNS:kafka-lso-exporter,IP:{POD_IP}",
                                "-keyout", f"{scratch}/k", "-out", f"{scratch}/c"],
                               check=True, capture_output=True)
                self._tls = (open(f"{scratch}/c", "rb").read(), open(f"{scratch}/k", "rb").read())
        return self._tls

    def mounts(self):
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        out = []
        for mount in self.container.get("volumeMounts", []):
            if mount["name"] not in volumes:
                raise Problem(f"volumeMount {mount['name']}: no such volume")
            out.append((mount, volumes[mount["name"]]))
        if self.spec.get("automountServiceAccountToken", True) is not False and not any(
                m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" for m, _ in out):
            out.append(({"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                         "readOnly": True},
                        {"name": "kube-api-access", "projected": {"sources": [
                            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                        ]}}))
        return out

    def referenced_keys(self, volume):
        """The files of a volume mounted whole that the pod names (in its ConfigMaps, args
        or env values): the keys its Secret must hold."""
        texts = [str(v) for d in self.objects if d.get("kind") == "ConfigMap"
                 for v in d.get("data", {}).values()]
        texts += [str(a) for a in self.container.get("args", [])]
        texts += [str(e.get("value", "")) for e in self.container.get("env", [])]
        keys = set()
        for mount in self.container.get("volumeMounts", []):
            if mount["name"] != volume["name"] or "subPath" in mount:
                continue
            prefix = re.escape(mount["mountPath"].rstrip("/") + "/")
            for text in texts:
                keys.update(re.findall(prefix + r"([A-Za-z0-9._-]+)", text))
        return sorted(keys)

    def volume_files(self, volume):
        """The files of a volume: {relative path: (content, mode)}; None for emptyDir."""
        if "emptyDir" in volume:
            return None
        default = None
        files = {}

        def add(kind, source, default_mode):
            if kind == "secret":
                name = source.get("secretName") or source.get("name")
                rendered = self.rendered_secret(name)
                if rendered is not None:
                    keys = [i["key"] for i in source.get("items", [])] or sorted(rendered)
                    missing = [k for k in keys if k not in rendered]
                    if missing:
                        raise Problem(f"Secret {name} has no key {', '.join(missing)}")
                    content = lambda key: rendered[key]
                else:
                    keys = [i["key"] for i in source.get("items", [])] or SECRET_KEYS.get(name) \
                        or self.referenced_keys(volume)
                    if not keys:
                        raise Problem(f"Secret {name} mounted whole: add its keys to SECRET_KEYS")
                    content = lambda key: self.stand_in(name, key)
            else:
                name = source["name"]
                config_map = self.find("ConfigMap", name)
                if config_map is None and name in CONFIG_MAP_DATA:
                    config_map = {"data": CONFIG_MAP_DATA[name]}
                if name == "kube-root-ca.crt":
                    content, keys = (lambda key: self.tls()[0]), ["ca.crt"]
                elif config_map is None:
                    raise Problem(f"ConfigMap {name} mounted but not rendered")
                else:
                    data = config_map.get("data", {})
                    keys = [i["key"] for i in source.get("items", [])] or list(data)
                    content = lambda key: data[key].encode()
            items = {i["key"]: i for i in source.get("items", [])}
            for key in keys:
                item = items.get(key, {})
                files[item.get("path", key)] = (content(key), item.get("mode", source.get("defaultMode", default_mode)))

        if "configMap" in volume:
            add("configMap", volume["configMap"], 0o644)
        elif "secret" in volume:
            add("secret", volume["secret"], 0o644)
        elif "downwardAPI" in volume:
            for item in volume["downwardAPI"]["items"]:
                files[item["path"]] = (self.field(item["fieldRef"]["fieldPath"]).encode(),
                                       item.get("mode", volume["downwardAPI"].get("defaultMode", 0o644)))
        elif "projected" in volume:
            default = volume["projected"].get("defaultMode", 0o644)
            for source in volume["projected"]["sources"]:
                if "serviceAccountToken" in source:
                    token = ".".join(base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
                                     for part in ({"alg": "RS256"}, {"aud": source["serviceAccountToken"].get("audience", "https://kubernetes.default.svc"),
                                                                      "sub": f"system:serviceaccount:{NAMESPACE}:{self.service_account()}",
                                                                      "exp": int(time.time()) + 3600}))
                    files[source["serviceAccountToken"]["path"]] = ((token + ".c3RhbmQtaW4").encode(), 0o600 if default == 0o644 else default)
                elif "secret" in source:
                    add("secret", source["secret"], default)
                elif "configMap" in source:
                    add("configMap", source["configMap"], default)
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"]["items"]:
                        files[item["path"]] = (self.field(item["fieldRef"]["fieldPath"]).encode(), item.get("mode", default))
        else:
            raise Problem(f"volume {volume['name']}: unsupported kind {sorted(volume)}")
        return files

    def probes(self):
        out = {}
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = self.container.get(kind)
            if probe:
                out[kind] = {**PROBE_DEFAULTS, **probe}
        return out

    def port(self, port):
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for entry in self.container.get("ports", []):
            if entry.get("name") == port:
                return entry["containerPort"]
        raise Problem(f"port {port!r} is not a port of the container")

    def scrape(self):
        """How Prometheus scrapes the pod: scheme, port, path, basic auth."""
        names = {p.get("name") for p in self.container.get("ports", [])}
        labels = self.meta.get("labels", {})
        for doc in self.objects:
            kind, spec = doc.get("kind"), doc.get("spec", {})
            selector = spec.get("selector", {})
            selected = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()) and all(
                (labels.get(e["key"]) in e.get("values", [])) == (e["operator"] == "In")
                for e in selector.get("matchExpressions", []) if e["operator"] in ("In", "NotIn"))
            if kind == "PodMonitor" and selected:
                endpoint = spec["podMetricsEndpoints"][0]
                return endpoint.get("scheme", "http"), self.port(endpoint["port"]), endpoint.get("path", "/metrics"), "basicAuth" in endpoint
            if kind == "ServiceMonitor":
                for service in self.objects:
                    if service.get("kind") != "Service" or not all(
                            service["metadata"].get("labels", {}).get(k) == v
                            for k, v in spec["selector"]["matchLabels"].items()):
                        continue
                    endpoint = spec["endpoints"][0]
                    port = next(p for p in service["spec"]["ports"] if p.get("name") == endpoint["port"])
                    target = port.get("targetPort", port["port"])
                    return endpoint.get("scheme", "http"), self.port(target), endpoint.get("path", "/metrics"), "basicAuth" in endpoint
        annotations = self.meta.get("annotations", {})
        if annotations.get("prometheus.io/scrape") == "true":
            return annotations.get("prometheus.io/scheme", "http"), int(annotations["prometheus.io/port"]), annotations.get("prometheus.io/path", "/metrics"), False
        scheme = "https" if "tls" in self.options.get("web", "") else "http"
        port = "metrics" if "metrics" in names else self.container["ports"][0]["containerPort"]
        return scheme, self.port(port), "/metrics", "basic" in self.options.get("web", "")


class Problem(Exception):
    pass


def pods(objects, options):
    """The pods of the rendered objects that run the exporter."""
    out = []
    for doc in objects:
        if doc.get("kind") not in ("Deployment", "StatefulSet", "DaemonSet", "Pod"):
            continue
        template = doc if doc["kind"] == "Pod" else doc["spec"]["template"]
        if any(c["name"] == options.get("container", CONTAINER) for c in template["spec"]["containers"]):
            out.append(Pod(objects, doc, options))
    return out


def expand(text, env):
    """Kubernetes' $(VAR) expansion; $$ escapes."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


# -- the container, in namespaces of its own --------------------------------------------


def run(cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def write_atomic(directory, files, uid, gid):
    """The kubelet's atomic writer: ..<timestamp>/ holds the files, ..data links to it, and
    each top-level name links through ..data."""
    stamp = "..2026_12_04_03_00_00.123456789"
    real = os.path.join(directory, stamp)
    os.makedirs(real)
    for relative, (content, mode) in files.items():
        path = os.path.join(real, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
        os.chown(path, uid, gid)
        os.chmod(path, mode if gid == 0 else mode | 0o040)
    os.symlink(stamp, os.path.join(directory, "..data"))
    for top in {r.split("/")[0] for r in files}:
        os.symlink(os.path.join("..data", top), os.path.join(directory, top))


def build_root(pod, root, exporter, uid, fs_group):
    """The image's filesystem: Debian's /usr and /etc (the image is Debian slim), the binary
    where the Dockerfile copies it, then the pod's volumes."""
    _, _, _, binary = image()
    run(["mount", "-t", "tmpfs", "-o", "mode=755", "rootfs", root])
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink("/" + top):
            os.symlink(os.readlink("/" + top), os.path.join(root, top))
    os.makedirs(os.path.join(root, "usr"))
    for entry in os.listdir("/usr"):
        if entry == "local" or not os.path.isdir(os.path.join("/usr", entry)):
            continue
        target = os.path.join(root, "usr", entry)
        os.makedirs(target)
        run(["mount", "--rbind", os.path.join("/usr", entry), target])
        run(["mount", "-o", "remount,bind,ro", target])
    target = os.path.join(root, binary.lstrip("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(exporter, target)
    os.chmod(target, 0o755)
    for path, source in image_files().items():
        target = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(source, target)
        os.chmod(target, 0o755)
    run(["cp", "-a", "/etc", os.path.join(root, "etc")])
    etc = os.path.join(root, "etc")
    with open(os.path.join(etc, "hosts"), "w") as f:
        f.write(f"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{POD_IP}\t{pod.name}\n")
        # Service names the cluster DNS resolves (a test forwards their ports on loopback).
        for name in filter(None, pod.options.get("hosts", "").split("+")):
            f.write(f"127.0.0.1\t{name}\n")
    with open(os.path.join(etc, "hostname"), "w") as f:
        f.write(pod.name + "\n")
    # The cluster DNS on an address nobody answers: every broker name fails to resolve.
    with open(os.path.join(etc, "resolv.conf"), "w") as f:
        f.write(f"search {NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.53\noptions ndots:5\n")
    for directory, mode in (("tmp", 0o1777), ("proc", 0o555), ("sys", 0o555), ("dev", 0o755),
                            ("run", 0o755), ("var/run", 0o755), ("root", 0o700)):
        os.makedirs(os.path.join(root, directory), exist_ok=True)
        os.chmod(os.path.join(root, directory), mode)
    run(["mount", "-t", "proc", "proc", os.path.join(root, "proc")])
    run(["mount", "--rbind", "/sys", os.path.join(root, "sys")])
    run(["mount", "-o", "remount,bind,ro", os.path.join(root, "sys")])
    dev = os.path.join(root, "dev")
    run(["mount", "-t", "tmpfs", "-o", "mode=755", "dev", dev])
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        open(os.path.join(dev, node), "w").close()
        run(["mount", "--bind", "/dev/" + node, os.path.join(dev, node)])
    os.makedirs(os.path.join(dev, "shm"))
    run(["mount", "-t", "tmpfs", "-o", "mode=1777", "shm", os.path.join(dev, "shm")])

    read_only = []
    staging = os.path.join(os.path.dirname(root), "volumes")
    os.makedirs(staging)
    for mount, volume in sorted(pod.mounts(), key=lambda mv: mv[0]["mountPath"].count("/")):
        files = pod.volume_files(volume)
        source = os.path.join(staging, volume["name"])
        if not os.path.isdir(source):
            os.makedirs(source)
            tmpfs = "mode=1777" if files is None else "mode=755"
            empty_dir = volume.get("emptyDir") or {}
            if empty_dir.get("medium") == "Memory" and empty_dir.get("sizeLimit"):
                # A memory-backed emptyDir is a tmpfs of its sizeLimit.
                number, unit = re.fullmatch(r"([0-9]+)([kKMG]i?)?", str(empty_dir["sizeLimit"])).groups()
                tmpfs += f",size={int(number) * LIMIT_FACTORS[unit or '']}"
            run(["mount", "-t", "tmpfs", "-o", tmpfs, volume["name"], source])
            if files is not None:
                write_atomic(source, files, 0, fs_group or 0)
            if fs_group is not None:
                os.chown(source, 0, fs_group)
        target = os.path.join(root, mount["mountPath"].lstrip("/"))
        origin = os.path.join(source, mount["subPath"]) if mount.get("subPath") else source
        if os.path.isdir(origin):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        run(["mount", "--bind", origin, target])
        # ConfigMap, Secret, downward API and projected volumes are always read-only.
        if mount.get("readOnly") or files is not None:
            read_only.append(target)
    for target in reversed(read_only):
        run(["mount", "-o", "remount,bind,ro", target])
    security = pod.container.get("securityContext", {})
    if security.get("readOnlyRootFilesystem"):
        run(["mount", "-o", "remount,ro", root])


def inside(path, options, exporter, index):
    """In the namespaces of one pod: start the container, probe it, stop it. Prints the
    outcome; exits 1 on a problem."""
    global POD_IP
    if options.get("net") == "host":
        POD_IP = "127.0.0.1"
    pod = pods(docs(path), options)[int(index)]
    problems, facts = [], []
    process = None
    work = tempfile.mkdtemp(prefix="pod-", dir=os.environ.get("POD_WORK", "/tmp"))
    root = os.path.join(work, "root")
    os.makedirs(root)
    log_path = os.path.join(work, "container.log")
    try:
        uid, gid, groups, fs_group = pod.user()
        env = pod.env()
        argv = pod.argv(env)
        if options.get("net") != "host":
            run(["ip", "link", "set", "lo", "up"])
            run(["ip", "addr", "add", f"{POD_IP}/32", "dev", "lo"])
        build_root(pod, root, exporter, uid, fs_group)
        security = pod.container.get("securityContext", {})
        setpriv = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={gid}"]
        setpriv += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
        if security.get("allowPrivilegeEscalation") is False:
            setpriv.append("--no-new-privs")
        if "ALL" in security.get("capabilities", {}).get("drop", []):
            setpriv += ["--inh-caps=-all", "--bounding-set=-all"]
        command = ["chroot", root] + setpriv + ["/usr/bin/env", "-i"] + [f"{k}={v}" for k, v in env.items()] + argv
        links = sorted(k for k in env if k.endswith("_SERVICE_HOST"))
        if (pod.options.get("links") == "on" or pod.options.get("services")) and not any(
                k.startswith("KAFKA_LSO_EXPORTER_") for k in links):
            problems.append("asked for service links, but no Service named kafka-lso-exporter* reaches the pod")
        facts.append(f"uid {uid} gid {gid} groups {groups or '-'}, "
                     f"root {'read-only' if security.get('readOnlyRootFilesystem') else 'writable'}, "
                     f"{len(env)} variables ({', '.join(links)}), "
                     f"mounts {', '.join(m['mountPath'] for m, _ in pod.mounts()) or '-'}")
        log = open(log_path, "wb")
        started = time.monotonic()
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        problems += probe(pod, process, started, facts)
        restarted = any(p.startswith(STARTUP_FAILED) for p in problems)
        if pod.options.get("expect") == "startup-failure":
            if restarted and len(problems) == 1:
                facts.append(f"as expected, {problems[0]}; no other probe ran before")
                problems = []
            else:
                problems.append("expected the startup probe to fail and the kubelet to restart the container")
        if restarted:
            # The kubelet kills the container (and would start it again).
            process.kill()
            process.wait()
        elif process.poll() is None:
            status = open(f"/proc/{process.pid}/status").read()
            real_uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
            if int(real_uid) != uid:
                problems.append(f"the process runs as uid {real_uid}, not {uid}")
            # The first cycle ends within the interval's timeout (15 s by default): until
            # then a cluster has no series yet, and a pod that is ready before (a sidecar
            # ready while alive) is scraped again.
            while True:
                missing = metrics(pod)
                if not missing or time.monotonic() - started > SCRAPED_WITHIN:
                    break
                time.sleep(2)
            problems += missing
            if not missing:
                scheme, port, path, _ = pod.scrape()
                facts.append(f"scraped {scheme}://{POD_IP}:{port}{path} at {time.monotonic() - started:.1f} s: every cluster there")
                if options.get("while"):
                    checks = subprocess.run([options["while"]], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                            env={**os.environ, "POD_IP": POD_IP, "POD_NAME": pod.name,
                                                 "METRICS_URL": f"{scheme}://{POD_IP}:{port}{path}"})
                    for line in (checks.stdout + checks.stderr).splitlines():
                        facts.append(f"while it runs: {line}")
                    if checks.returncode != 0:
                        problems.append(f"{options['while']} failed (exit {checks.returncode})")
            grace = pod.spec.get("terminationGracePeriodSeconds", 30)
            process.send_signal(signal.SIGTERM)
            stopping = time.monotonic()
            try:
                code = process.wait(timeout=grace)
                facts.append(f"SIGTERM: exit {code} after {time.monotonic() - stopping:.1f} s (grace {grace} s)")
                if code != 0:
                    problems.append(f"exit status {code} after SIGTERM")
            except subprocess.TimeoutExpired:
                problems.append(f"still running {grace} s after SIGTERM: the kubelet kills it")
        log.close()
        text = open(log_path, errors="replace").read()
        for pattern in ("panicked", "Read-only file system", "Permission denied", "EROFS", "EACCES"):
            if pattern in text:
                line = next(l for l in text.splitlines() if pattern in l)
                problems.append(f"the log says {pattern!r}: {line[:300]}")
    except Problem as e:
        problems.append(str(e))
    finally:
        if process and process.poll() is None:
            process.kill()
            process.wait()
    for fact in facts:
        print(f"  {pod.title}: {fact}")
    for problem in problems:
        print(f"  {pod.title}: PROBLEM {problem}")
    if problems and os.path.exists(log_path):
        print(f"  {pod.title}: its log:")
        for line in open(log_path, errors="replace").read().splitlines()[-15:]:
            print(f"    {line[:300]}")
    return 1 if problems else 0


def attempt(pod, probe):
    """One probe as the kubelet sends it."""
    timeout = probe["timeoutSeconds"]
    try:
        if "httpGet" in probe:
            get = probe["httpGet"]
            port = pod.port(get["port"])
            if get.get("scheme", "HTTP") == "HTTPS":
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                conn = http.client.HTTPSConnection(get.get("host", POD_IP), port, timeout=timeout, context=context)
            else:
                conn = http.client.HTTPConnection(get.get("host", POD_IP), port, timeout=timeout)
            headers = {"User-Agent": KUBE_PROBE, "Accept": "*/*"}
            headers.update({h["name"]: h["value"] for h in get.get("httpHeaders", [])})
            conn.request("GET", get.get("path", "/"), headers=headers)
            status = conn.getresponse().status
            conn.close()
            return 200 <= status < 400, f"HTTP {status}"
        if "tcpSocket" in probe:
            socket.create_connection((probe["tcpSocket"].get("host", POD_IP), pod.port(probe["tcpSocket"]["port"])),
                                     timeout=timeout).close()
            return True, "connected"
        raise Problem(f"unsupported probe {sorted(probe)}")
    except (OSError, http.client.HTTPException) as e:
        return False, f"{type(e).__name__}: {e}"


def probe(pod, process, started, facts):
    """The kubelet's probe workers: startup first, then liveness and readiness on their
    periods. Returns the problems."""
    probes = pod.probes()
    problems = []
    if not probes:
        return ["no probes"]
    for kind, p in probes.items():
        facts.append(f"{kind} {describe(p)}")
    startup = probes.get("startupProbe")
    began = 0.0
    if startup:
        ok, what = run_probe(pod, process, started, startup, "startupProbe", 0.0, until_success=True)
        at = time.monotonic() - started
        if not ok and process.poll() is not None:
            return [f"the process exited with status {process.returncode} at {at:.1f} s, before its startup probe passed"]
        if not ok:
            return [f"{STARTUP_FAILED} {startup['failureThreshold']} times, the last at {at:.1f} s ({what}): "
                    "the kubelet restarts the container"]
        began = at
        facts.append(f"started at {at:.1f} s (startupProbe {what}); liveness and readiness from then on")
    live, ready = probes.get("livenessProbe"), probes.get("readinessProbe")
    # Both workers at once, on one clock. The initial delay counts from the container's
    # start (the kubelet's worker compares it with StartedAt), not from the startup
    # probe's success.
    schedule = []
    for kind, p in (("livenessProbe", live), ("readinessProbe", ready)):
        if p:
            schedule.append([max(began, p["initialDelaySeconds"]), kind, p, 0])
    ready_at = None
    live_checks = 0
    while schedule:
        schedule.sort(key=lambda s: s[0])
        due, kind, p, failures = schedule[0]
        now = time.monotonic() - started
        if due > now:
            time.sleep(due - now)
        if process.poll() is not None:
            return [f"the process exited with status {process.returncode} at {time.monotonic() - started:.1f} s"]
        ok, what = attempt(pod, p)
        at = time.monotonic() - started
        if kind == "livenessProbe":
            failures = 0 if ok else failures + 1
            live_checks += 1
            if failures >= p["failureThreshold"]:
                return [f"livenessProbe failed {failures} times in a row, the last at {at:.1f} s ({what}): the kubelet restarts the container"]
        elif ok and ready_at is None:
            ready_at = at
            facts.append(f"ready at {at:.1f} s ({what})")
        elif not ok and ready_at is None and at > READY_WITHIN:
            return [f"not ready {READY_WITHIN:.0f} s after the start ({what})"]
        elif not ok and ready_at is not None:
            problems.append(f"readinessProbe failed at {at:.1f} s after being ready ({what})")
        schedule[0] = [due + p["periodSeconds"], kind, p, failures]
        # Done once ready and liveness has passed on its schedule at least twice (or for
        # as long as a restart could have come).
        if (ready or ready_at is not None) and (ready is None or ready_at is not None) and \
                (live is None or live_checks >= 2 and at >= max(began, live["initialDelaySeconds"])):
            break
    if ready is None and live:
        facts.append("no readinessProbe: ready once started")
    return problems


def run_probe(pod, process, started, p, kind, began, until_success):
    failures = 0
    due = began + p["initialDelaySeconds"]
    while True:
        now = time.monotonic() - started
        if due > now:
            time.sleep(due - now)
        if process.poll() is not None:
            return False, f"exited with status {process.returncode}"
        ok, what = attempt(pod, p)
        if ok:
            return True, what
        failures += 1
        if failures >= p["failureThreshold"]:
            return False, what
        due += p["periodSeconds"]


def describe(p):
    if "httpGet" in p:
        target = f"{p['httpGet'].get('scheme', 'HTTP')} {p['httpGet'].get('path', '/')} on {p['httpGet']['port']}"
    elif "tcpSocket" in p:
        target = f"TCP on {p['tcpSocket']['port']}"
    else:
        target = str(sorted(p))
    return f"{target} (delay {p['initialDelaySeconds']} s, every {p['periodSeconds']} s, timeout {p['timeoutSeconds']} s, {p['failureThreshold']} failures)"


def metrics(pod):
    """/metrics as Prometheus scrapes it: each configured cluster is there (up 0: nothing
    is reachable), or, in a coordination group, the replica's own HA series."""
    scheme, port, path, basic = pod.scrape()
    headers = {"Accept": "text/plain;version=0.0.4"}
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(b"prometheus:changeme").decode()
    try:
        if scheme == "https":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(POD_IP, port, timeout=10, context=context)
        else:
            conn = http.client.HTTPConnection(POD_IP, port, timeout=10)
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read().decode()
    except (OSError, http.client.HTTPException) as e:
        return [f"/metrics ({scheme} on {port}): {type(e).__name__}: {e}"]
    if response.status != 200:
        return [f"/metrics ({scheme} on {port}): HTTP {response.status}"]
    problems = []
    config = pod_config(pod)
    if "kafka_lso_exporter_build_info{" not in body:
        problems.append("/metrics has no kafka_lso_exporter_build_info")
    if config.get("ha", {}).get("group"):
        if "kafka_lso_exporter_ha_serving_clusters{" not in body:
            problems.append("/metrics has no kafka_lso_exporter_ha_serving_clusters (an [ha] replica)")
    else:
        for cluster in config.get("clusters", []):
            if f'kafka_lso_exporter_up{{kafka_cluster="{cluster["name"]}"}} 0' not in body:
                problems.append(f"/metrics has no kafka_lso_exporter_up 0 for cluster {cluster['name']}")
    return problems


def pod_config(pod):
    import tomllib
    for doc in pod.objects:
        if doc.get("kind") == "ConfigMap" and "kafka-lso-exporter.toml" in doc.get("data", {}):
            return tomllib.loads(doc["data"]["kafka-lso-exporter.toml"])
    return {}


def main(argv):
    if argv[1] == "--inside":
        _, _, path, options, exporter, index = argv
        return inside(path, dict(o.split("=", 1) for o in options.split(",") if o), exporter, index)
    exporter = os.path.abspath(argv[1])
    runs = []
    for spec in argv[2:]:
        path, _, options = spec.partition(":")
        parsed = dict(o.split("=", 1) for o in options.split(",") if o)
        count = len(pods(docs(path), parsed))
        if count == 0:
            print(f"FAIL  {path}: no pod with a container {parsed.get('container', CONTAINER)}")
            runs.append((path, None))
        for index in range(count):
            net = [] if parsed.get("net") == "host" else ["--net"]
            cmd = ["unshare", "--mount", *net, "--propagation", "private", "--",
                   sys.executable, os.path.abspath(__file__), "--inside", path, options, exporter, str(index)]
            runs.append((path, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    failed = 0
    for path, process in runs:
        if process is None:
            failed += 1
            continue
        out, _ = process.communicate()
        if process.returncode == 0:
            print(f"ok    started as a kubelet starts it: {path}")
        else:
            print(f"FAIL  started as a kubelet starts it: {path}")
            failed += 1
        print(out.rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
