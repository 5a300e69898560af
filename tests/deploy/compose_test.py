#!/usr/bin/env python3
"""Checks that docker-compose.yml, deploy/prometheus and deploy/grafana are
wired to each other and to the image: Prometheus scrapes the compose
service that runs the Dockerfile on the port memplan-server serves metrics
on, its rule files exist where the mounted config points, Grafana's
datasource is the compose Prometheus, the dashboard provider reads the
folder the dashboards are mounted at, the dashboard's datasource is the
provisioned one, and every port is published on 127.0.0.1 only.

No Docker engine runs here, so compose itself is not started: the image it
builds is built and run by tests/container/run.sh.
Exit 0 when every check passes, 1 on a failure, 77 without python3-yaml.
"""
import json
import os
import posixpath
import sys
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(__file__))
from deploy_common import ROOT, Checks, dockerfile, flag_port, flag_value, \
    load_yaml_module

yaml = load_yaml_module()
c = Checks()
image = dockerfile()
compose = yaml.safe_load(open(os.path.join(ROOT, "docker-compose.yml")))
services = compose["services"]


def mounts(service):
    """container path -> host path (relative to the repo) of bind mounts."""
    out = {}
    for v in services[service].get("volumes", []):
        host, target = v.split(":")[:2]
        if host.startswith("./"):
            out[target] = os.path.normpath(host[2:])
    return out


def host_path(service, container_path):
    """The repo file a container path of `service` is bind-mounted from."""
    for target, host in sorted(mounts(service).items(), key=lambda t: -len(t[0])):
        if container_path == target or container_path.startswith(target + "/"):
            return os.path.join(ROOT, host, os.path.relpath(container_path, target))
    return None


# Every published port is on 127.0.0.1.
for name, s in services.items():
    for p in s.get("ports", []):
        c.check(str(p).startswith("127.0.0.1:"), f"{name}: port {p} is on 127.0.0.1 only")

# memplan-server: built from the Dockerfile, its ports published.
server = [n for n, s in services.items()
          if isinstance(s.get("build"), dict) and
          s["build"].get("dockerfile", "Dockerfile") == "Dockerfile"]
c.check(len(server) == 1, f"one service builds the Dockerfile (got {server})")
server = server[0] if server else "memplan-server"
entry = image["entrypoint"]
grpc_port = flag_port(entry, "address")
metrics_port = flag_port(entry, "metrics_address")
published = {int(str(p).split(":")[-1]) for p in services[server].get("ports", [])}
c.check(grpc_port in published, f"{server}: gRPC port {grpc_port} published")
c.check(str(services[server].get("user", "")).split(":")[0] == image["user"].split(":")[0],
        f"{server}: user matches the Dockerfile's USER {image['user']}")
grace = float(flag_value(services[server].get("command", []), "grace_seconds") or 5)
sgp = services[server].get("stop_grace_period", "10s")
c.check(float(sgp.rstrip("s")) > grace,
        f"{server}: stop_grace_period {sgp} > --grace_seconds {grace}")

# Prometheus: the mounted config scrapes memplan-server's metrics port.
prom = "prometheus"
cmd = services[prom]["command"]
config_path = host_path(prom, flag_value(cmd, "config.file"))
c.check(config_path and os.path.isfile(config_path),
        f"prometheus: --config.file is mounted from the repo ({config_path})")
config = yaml.safe_load(open(config_path))
targets = [t for job in config["scrape_configs"]
           for sc in job.get("static_configs", []) for t in sc["targets"]]
c.check(f"{server}:{metrics_port}" in targets,
        f"prometheus scrapes {server}:{metrics_port} (targets {targets})")
container_config_dir = posixpath.dirname(flag_value(cmd, "config.file"))
for rf in config.get("rule_files", []):
    path = host_path(prom, posixpath.join(container_config_dir, rf))
    c.check(path and os.path.isfile(path), f"prometheus rule file {rf} is mounted ({path})")
prom_port = flag_port(cmd, "web.listen-address")

# Grafana: datasource -> the compose Prometheus; provider -> mounted dashboards.
graf = "grafana"
prov_dir = host_path(graf, "/etc/grafana/provisioning")
c.check(prov_dir and os.path.isdir(prov_dir), "grafana: provisioning folder mounted")
uids = set()
for f in sorted(os.listdir(os.path.join(prov_dir, "datasources"))):
    for ds in yaml.safe_load(open(os.path.join(prov_dir, "datasources", f)))["datasources"]:
        url = urlparse(ds["url"])
        c.check(url.hostname == prom and url.port == prom_port,
                f"grafana datasource {ds['name']} is http://{prom}:{prom_port} ({ds['url']})")
        uids.add(ds["uid"])
dashboards = []
for f in sorted(os.listdir(os.path.join(prov_dir, "dashboards"))):
    for p in yaml.safe_load(open(os.path.join(prov_dir, "dashboards", f)))["providers"]:
        folder = host_path(graf, p["options"]["path"])
        c.check(folder and os.path.isdir(folder),
                f"grafana provider {p['name']} reads a mounted folder ({folder})")
        if folder:
            dashboards += [os.path.join(folder, d) for d in os.listdir(folder)
                           if d.endswith(".json")]
c.check(len(dashboards) >= 1, "at least one dashboard is provisioned")
for path in dashboards:
    d = json.load(open(path))
    variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
    default_ds = variables.get("datasource", {}).get("current", {}).get("value")
    for panel in d["panels"]:
        for t in [panel] + panel.get("targets", []):
            uid = t.get("datasource", {}).get("uid")
            resolved = default_ds if uid == "${datasource}" else uid
            c.check(resolved in uids,
                    f"{os.path.basename(path)} panel {panel['title']!r}: datasource "
                    f"{uid} resolves to a provisioned one ({resolved})")
        c.check(all(t.get("expr") for t in panel.get("targets", [])) and panel.get("targets"),
                f"{os.path.basename(path)} panel {panel['title']!r} has queries")

# The plan cache's Redis: the service --cache names, memory only, evicting
# least recently used at a --maxmemory below its container's limit, and
# not published.
def to_bytes(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = str(text).lower().rstrip("b")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


cache = flag_value(services[server].get("command", []), "cache")
if cache and cache.startswith("redis://"):
    url = urlparse(cache)
    redis = services.get(url.hostname)
    if c.check(redis is not None, f"{server}: --cache names service {url.hostname}"):
        args = redis.get("command", [])
        def arg(name):
            return args[args.index(name) + 1] if name in args else None
        c.check(url.port == int(arg("--port") or 6379),
                f"{url.hostname}: listens on the port --cache names ({url.port})")
        c.check(arg("--maxmemory-policy") == "allkeys-lru",
                f"{url.hostname}: --maxmemory-policy allkeys-lru")
        c.check(arg("--save") == "" and arg("--appendonly") == "no",
                f"{url.hostname}: no persistence (--save '' --appendonly no)")
        limit = redis.get("mem_limit")
        c.check(limit is not None and arg("--maxmemory") is not None and
                to_bytes(arg("--maxmemory")) < to_bytes(limit),
                f"{url.hostname}: --maxmemory {arg('--maxmemory')} below mem_limit {limit}")
        c.check(not redis.get("ports"), f"{url.hostname}: no published port")
        c.check(url.hostname in services[server].get("depends_on", []),
                f"{server} depends on {url.hostname}")

c.finish()
