#!/usr/bin/env python3
"""Renders deploy/k8s (base and every overlay) with `kubectl kustomize`,
offline, and checks what a cluster would get: native gRPC probes on the gRPC
port, the "restricted" Pod Security Standard, a read-only root filesystem,
a drain window longer than the server's --grace_seconds, ports that match
the image, Services, HPA, PDB and ServiceMonitor that select the pods.

Exit 0 when every check passes, 1 on a failure, 77 (skip) when kubectl or
python3-yaml is missing.
"""
import glob
import os
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
    c.check(dep["spec"]["replicas"] >= 2, f"{where}: at least 2 replicas")

c.finish()
