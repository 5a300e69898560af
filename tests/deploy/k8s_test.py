#!/usr/bin/env python3
"""Renders deploy/k8s (base and every overlay) with `kubectl kustomize`,
offline, and checks what a cluster would get: native gRPC probes on the gRPC
port, the "restricted" Pod Security Standard, a read-only root filesystem,
a drain window longer than the server's --grace_seconds, ports that match
the image, Services, HPA, PDB and ServiceMonitor that select the pods, and
where the server's plan cache is on Redis (overlays/redis), that Redis:
its Service, maxmemory under its memory limit with allkeys-lru, and a
NetworkPolicy letting only memplan-server pods in.

Exit 0 when every check passes, 1 on a failure, 77 (skip) when kubectl or
python3-yaml is missing.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from deploy_common import ROOT, Checks, dockerfile, flag_port, flag_value, \
    load_yaml_module, skip

yaml = load_yaml_module()
KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")
if not KUBECTL:
    skip("kubectl is not installed: it is not in Debian 12; install it from "
         "your Kubernetes distribution to run this test")

c = Checks()
image = dockerfile()


def render(path):
    r = subprocess.run([KUBECTL, "kustomize", path], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        c.check(False, f"kubectl kustomize {path}: {r.stderr.strip()}")
        return []
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def one(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and
             (name is None or o["metadata"]["name"] == name)]
    c.check(len(found) == 1, f"exactly one {kind} {name or ''} (got {len(found)})")
    return found[0] if found else {}


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_restricted(pod, where):
    """The "restricted" Pod Security Standard, as the admission plugin checks
    it (pod level, then every container)."""
    psc = pod.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        c.check(not pod.get(key), f"{where}: {key} is not set")
    for v in pod.get("volumes", []):
        c.check("hostPath" not in v, f"{where}: no hostPath volume ({v['name']})")
    c.check(psc.get("runAsUser", 1) != 0, f"{where}: pod runAsUser is not 0")
    for ct in pod["containers"] + pod.get("initContainers", []):
        sc = ct.get("securityContext", {})
        name = f"{where} container {ct['name']}"
        c.check(sc.get("allowPrivilegeEscalation") is False,
                f"{name}: allowPrivilegeEscalation: false")
        c.check(not sc.get("privileged"), f"{name}: not privileged")
        c.check(psc.get("runAsNonRoot") is True or sc.get("runAsNonRoot") is True,
                f"{name}: runAsNonRoot: true")
        c.check(sc.get("runAsUser", 1) != 0, f"{name}: runAsUser is not 0")
        caps = sc.get("capabilities", {})
        c.check("ALL" in caps.get("drop", []), f"{name}: capabilities drop ALL")
        c.check(set(caps.get("add", [])) <= {"NET_BIND_SERVICE"},
                f"{name}: adds no capability but NET_BIND_SERVICE")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {})
        c.check(seccomp.get("type") in ("RuntimeDefault", "Localhost"),
                f"{name}: seccompProfile RuntimeDefault or Localhost")
        c.check(sc.get("readOnlyRootFilesystem") is True,
                f"{name}: readOnlyRootFilesystem: true")


def check_deployment(objects, where):
    dep = one(objects, "Deployment", "memplan-server")
    if not dep:
        return None
    pod = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    c.check(selects(dep["spec"]["selector"]["matchLabels"], labels),
            f"{where}: Deployment selector matches its pod labels")
    check_restricted(pod, where)
    ct = [x for x in pod["containers"] if x["name"] == "memplan-server"]
    if not c.check(len(ct) == 1, f"{where}: container memplan-server"):
        return None
    ct = ct[0]
    ports = {p["name"]: p["containerPort"] for p in ct.get("ports", [])}
    entry = image.get("entrypoint", [])
    grpc_port = flag_port(entry, "address")
    metrics_port = flag_port(entry, "metrics_address")
    c.check(ports.get("grpc") == grpc_port,
            f"{where}: port grpc {ports.get('grpc')} is the image's --address port {grpc_port}")
    c.check(ports.get("metrics") == metrics_port,
            f"{where}: port metrics {ports.get('metrics')} is the image's --metrics_address port {metrics_port}")
    c.check(set(ports.values()) <= set(image.get("expose", [])),
            f"{where}: container ports {sorted(ports.values())} are EXPOSEd by the image")
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        p = ct.get(probe)
        if probe == "startupProbe" and p is None:
            continue
        c.check(p is not None and "grpc" in p,
                f"{where}: {probe} is a native gRPC probe")
        if p and "grpc" in p:
            c.check(p["grpc"].get("port") == grpc_port,
                    f"{where}: {probe} probes the gRPC port {grpc_port}")
    ready = ct.get("readinessProbe", {}).get("grpc", {})
    c.check(ready.get("service") == "memplan.v1.MemoryPlanner",
            f"{where}: readiness checks the memplan.v1.MemoryPlanner service")
    req = ct.get("resources", {}).get("requests", {})
    c.check("cpu" in req and "memory" in req,
            f"{where}: resources.requests has cpu and memory (HPA needs cpu)")
    # The memory limit holds what the flags let the server hold: its
    # Benchmark replays and a plan of a million buffers (about 800 MB,
    # docs/server.md) on each worker.
    args = ct.get("args", [])
    replays = (int(flag_value(args, "max_benchmarks") or 2) *
               int(flag_value(args, "max_benchmark_bytes") or 1 << 30))
    workers = flag_value(args, "worker_threads")
    c.check(workers is not None and int(workers) > 0,
            f"{where}: --worker_threads is set (its default, one per core of "
            f"the node, is not known to the memory limit)")
    plans = int(workers or 0) * 800 * (1 << 20)
    limit = ct.get("resources", {}).get("limits", {}).get("memory")
    c.check(limit is not None and to_bytes(limit) >= replays + plans,
            f"{where}: memory limit {limit} holds the replays "
            f"({replays >> 20} MiB) and a large plan per worker "
            f"({plans >> 20} MiB)")
    # The HorizontalPodAutoscaler owns the count: replicas here would
    # reset it on every apply.
    c.check("replicas" not in dep["spec"],
            f"{where}: the Deployment leaves replicas to the HPA")
    grace = float(flag_value(ct.get("args", []), "grace_seconds") or 5)
    tgps = pod.get("terminationGracePeriodSeconds", 30)
    c.check(tgps > grace,
            f"{where}: terminationGracePeriodSeconds {tgps} > --grace_seconds {grace}")
    # Health answers NOT_SERVING for --drain_seconds before the server
    # closes: long enough for the readiness probe to fail and the pod to
    # leave the endpoints, and within the grace period.
    drain = float(flag_value(ct.get("args", []), "drain_seconds") or 2)
    probe = ct.get("readinessProbe", {})
    unready_after = probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
    c.check(drain >= unready_after,
            f"{where}: --drain_seconds {drain} >= readiness periodSeconds x "
            f"failureThreshold ({unready_after})")
    c.check(drain < grace,
            f"{where}: --drain_seconds {drain} < --grace_seconds {grace}")
    user = image.get("user", "")
    c.check(user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0,
            f"Dockerfile USER {user!r} is numeric and not root (runAsNonRoot can verify it)")
    run_as = pod.get("securityContext", {}).get("runAsUser")
    c.check(run_as is None or str(run_as) == user.split(":")[0],
            f"{where}: runAsUser {run_as} is the image's USER {user}")
    return dep, labels, ports


def check_services(objects, labels, ports, where):
    svc = one(objects, "Service", "memplan-server")
    headless = one(objects, "Service", "memplan-server-headless")
    for s in (svc, headless):
        if not s:
            continue
        name = s["metadata"]["name"]
        c.check(selects(s["spec"].get("selector"), labels),
                f"{where}: Service {name} selects the memplan-server pods")
        by_name = {p["name"]: p for p in s["spec"]["ports"]}
        g = by_name.get("grpc", {})
        c.check(g.get("targetPort") in ("grpc", ports.get("grpc")),
                f"{where}: Service {name} port grpc targets the container's gRPC port")
        c.check(g.get("appProtocol") == "grpc" or g.get("name") == "grpc",
                f"{where}: Service {name} marks its port as gRPC")
    c.check(headless.get("spec", {}).get("clusterIP") == "None",
            f"{where}: memplan-server-headless is headless (clusterIP: None)")
    c.check(svc.get("spec", {}).get("clusterIP") != "None",
            f"{where}: memplan-server has a cluster IP")
    return svc, headless


def check_scaling(objects, dep, labels, where):
    hpa = one(objects, "HorizontalPodAutoscaler", "memplan-server")
    pdb = one(objects, "PodDisruptionBudget", "memplan-server")
    if hpa:
        c.check(hpa["apiVersion"] == "autoscaling/v2", f"{where}: HPA is autoscaling/v2")
        ref = hpa["spec"]["scaleTargetRef"]
        c.check(ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"],
                f"{where}: HPA scales the Deployment")
        cpu = [m for m in hpa["spec"].get("metrics", [])
               if m.get("type") == "Resource" and m["resource"]["name"] == "cpu"]
        c.check(len(cpu) == 1 and cpu[0]["resource"]["target"]["type"] == "Utilization",
                f"{where}: HPA scales on CPU utilization")
        c.check(hpa["spec"]["minReplicas"] >= 2, f"{where}: HPA keeps at least 2 replicas")
    if pdb:
        c.check(pdb["apiVersion"] == "policy/v1", f"{where}: PDB is policy/v1")
        c.check(selects(pdb["spec"]["selector"]["matchLabels"], labels),
                f"{where}: PDB selects the memplan-server pods")
        if hpa and "minAvailable" in pdb["spec"]:
            c.check(pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"],
                    f"{where}: PDB minAvailable below minReplicas (drains can proceed)")
    return hpa


def check_monitor(objects, svc, headless, where):
    sm = one(objects, "ServiceMonitor", "memplan-server")
    if not sm:
        return
    sel = sm["spec"]["selector"]["matchLabels"]
    c.check(selects(sel, svc["metadata"]["labels"]),
            f"{where}: ServiceMonitor selects Service memplan-server")
    c.check(not selects(sel, headless["metadata"]["labels"]),
            f"{where}: ServiceMonitor does not also select the headless Service")
    svc_ports = {p["name"] for p in svc["spec"]["ports"]}
    for e in sm["spec"]["endpoints"]:
        c.check(e["port"] in svc_ports and e["port"] == "metrics",
                f"{where}: ServiceMonitor scrapes the Service's metrics port")
        c.check(e.get("path", "/metrics") == "/metrics", f"{where}: path /metrics")


def to_bytes(text):
    """Bytes of a Kubernetes quantity (512Mi) or a Redis size (384mb)."""
    text = str(text)
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30,
             "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(text[: -len(unit)]) * factor
    return int(text)


def check_plan_cache(objects, dep, where):
    """With --cache=redis://HOST:PORT: a Service HOST on PORT selecting a
    Redis pod with maxmemory below its memory limit and allkeys-lru, no
    persistence, the restricted standard, and a NetworkPolicy admitting
    only memplan-server pods on that port."""
    ct = dep["spec"]["template"]["spec"]["containers"][0]
    cache = flag_value(ct.get("args", []), "cache")
    if not cache or not cache.startswith("redis://"):
        return
    host, port = cache[len("redis://"):].rsplit(":", 1)
    port = int(port)
    svc = one(objects, "Service", host)
    if not svc:
        return
    c.check(any(p["port"] == port for p in svc["spec"]["ports"]),
            f"{where}: Service {host} serves port {port}")
    redis = [o for o in objects if o["kind"] == "Deployment" and
             selects(svc["spec"].get("selector"),
                     o["spec"]["template"]["metadata"]["labels"])]
    if not c.check(len(redis) == 1, f"{where}: Service {host} selects one Deployment"):
        return
    redis = redis[0]
    pod = redis["spec"]["template"]["spec"]
    check_restricted(pod, f"{where} {redis['metadata']['name']}")
    rc = pod["containers"][0]
    args = rc.get("args", []) + rc.get("command", [])

    def arg(name):
        return args[args.index(name) + 1] if name in args else None
    c.check(arg("--maxmemory-policy") == "allkeys-lru",
            f"{where}: Redis --maxmemory-policy allkeys-lru")
    c.check(arg("--save") == "" and arg("--appendonly") == "no",
            f"{where}: Redis keeps no snapshot or append-only file")
    limit = rc.get("resources", {}).get("limits", {}).get("memory")
    c.check(limit is not None and arg("--maxmemory") is not None and
            to_bytes(arg("--maxmemory")) < to_bytes(limit),
            f"{where}: Redis --maxmemory {arg('--maxmemory')} below its memory limit {limit}")
    ports = {p.get("name"): p["containerPort"] for p in rc.get("ports", [])}
    target = [p.get("targetPort") for p in svc["spec"]["ports"] if p["port"] == port]
    c.check(bool(target) and (target[0] in ports or target[0] in ports.values()),
            f"{where}: Service {host} targets a Redis container port")
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    server_labels = dep["spec"]["template"]["metadata"]["labels"]
    policies = [o for o in objects if o["kind"] == "NetworkPolicy" and
                selects(o["spec"]["podSelector"].get("matchLabels"), redis_labels)]
    if not c.check(len(policies) == 1, f"{where}: one NetworkPolicy guards Redis"):
        return
    spec = policies[0]["spec"]
    c.check("Ingress" in spec.get("policyTypes", []),
            f"{where}: the Redis NetworkPolicy restricts ingress")
    rules = spec.get("ingress", [])
    c.check(len(rules) >= 1, f"{where}: the Redis NetworkPolicy admits someone")
    for rule in rules:
        peers = rule.get("from", [])
        c.check(bool(peers) and all(
            set(p) == {"podSelector"} and
            selects(p["podSelector"].get("matchLabels"), server_labels) and
            not selects(p["podSelector"].get("matchLabels"), redis_labels)
            for p in peers),
            f"{where}: Redis admits only memplan-server pods")
        c.check([p.get("port") for p in rule.get("ports", [])] in
                ([port], [ports.get("redis")]),
                f"{where}: Redis admits them on its port only")
    # Entries signed with a secret the replicas share, mounted read-only
    # from a Secret where --cache_secret_file looks for it.
    secret_file = flag_value(ct.get("args", []), "cache_secret_file")
    if not c.check(secret_file is not None,
                   f"{where}: the plan cache's entries are signed "
                   "(--cache_secret_file)"):
        return
    pod_spec = dep["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = [m for m in ct.get("volumeMounts", [])
              if secret_file.startswith(m["mountPath"].rstrip("/") + "/")]
    c.check(len(mounts) == 1 and mounts[0].get("readOnly") is True and
            "secret" in volumes.get(mounts[0]["name"], {}),
            f"{where}: {secret_file} is in a read-only Secret volume")


def check_tree(path):
    where = os.path.relpath(path, ROOT)
    objects = render(path)
    if not objects:
        return objects, None
    r = check_deployment(objects, where)
    if not r:
        return objects, None
    dep, labels, ports = r
    svc, headless = check_services(objects, labels, ports, where)
    check_scaling(objects, dep, labels, where)
    check_monitor(objects, svc, headless, where)
    check_plan_cache(objects, dep, where)
    return objects, dep


base_objects, base_dep = check_tree(os.path.join(ROOT, "deploy/k8s/base"))
overlays = sorted(glob.glob(os.path.join(ROOT, "deploy/k8s/overlays/*")))
c.check(len(overlays) >= 1, "deploy/k8s has at least one overlay")
for path in overlays:
    where = os.path.relpath(path, ROOT)
    objects, dep = check_tree(path)
    if not dep:
        continue
    ns = [o for o in objects if o["kind"] == "Namespace"]
    if ns:
        name = ns[0]["metadata"]["name"]
        c.check(ns[0]["metadata"].get("labels", {}).get(
            "pod-security.kubernetes.io/enforce") == "restricted",
            f"{where}: Namespace {name} enforces the restricted Pod Security Standard")
        for o in objects:
            if o["kind"] != "Namespace":
                c.check(o["metadata"].get("namespace") == name,
                        f"{where}: {o['kind']} {o['metadata']['name']} is in namespace {name}")
    img = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    c.check(":" in img and not img.endswith(":latest"),
            f"{where}: image {img} is pinned to a tag")
    # The pinned image must know the flags the overlay passes: this
    # version's (0.1.0 had no --drain_seconds nor --cache).
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        version = re.search(r"project\(memplan VERSION ([0-9.]+)", f.read())
    c.check(version is not None and img.endswith(":" + version.group(1)),
            f"{where}: image {img} is this version "
            f"({version.group(1) if version else '?'})")

c.finish()
