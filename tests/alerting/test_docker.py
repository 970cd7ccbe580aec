"""The docker stack, checked without a Docker engine: parse, cross-check names, promtool."""

from __future__ import annotations

import re
import shutil

import pytest

from fairmonitor.alerting.provisioning import (
    DASHBOARD_DIR,
    dashboard_provisioning,
    datasource_provisioning,
)

from .conftest import DASHBOARDS, DOCKER, EXAMPLE_CONFIG, REPO, read_yaml, run_promtool

COMPOSE = DOCKER / "compose.yaml"
GRAFANA_ALERTING_COMPOSE = DOCKER / "compose.grafana-alerting.yaml"
PROMETHEUS = DOCKER / "prometheus.yml"
PROMETHEUS_GRAFANA = DOCKER / "prometheus.grafana-alerting.yml"
ALERTMANAGER = DOCKER / "alertmanager.yml"
DOCKERFILE = DOCKER / "Dockerfile"
PROVISIONING = DASHBOARDS / "provisioning"


@pytest.fixture(scope="module")
def compose():
    return read_yaml(COMPOSE)


@pytest.fixture(scope="module")
def services(compose):
    return compose["services"]


def _mounts(service):
    """container path -> host path (resolved from docker/) of the bind mounts of a service."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            out[target] = (DOCKER / source).resolve()
    return out


def _named_volumes(service):
    return {v.split(":")[0] for v in service.get("volumes", [])
            if not v.startswith((".", "/"))}


def _container_port(service):
    (mapping,) = service["ports"]
    host, host_port, container_port = mapping.split(":")
    assert host == "127.0.0.1"  # never published on every interface
    return int(container_port)


def test_services(services):
    assert set(services) == {"mlflow", "prometheus", "alertmanager", "alert-log", "grafana",
                             "monitor", "demo"}


def test_images_are_pinned_to_patch_releases(services):
    images = {name: s["image"] for name, s in services.items()}
    built = {name for name, s in services.items() if "build" in s}
    assert built == {"monitor", "demo"}
    for name, image in images.items():
        if name in built:
            continue
        tag = image.rsplit(":", 1)[1]
        assert re.fullmatch(r"v?\d+\.\d+\.\d+(-[a-z]+-[a-z]+)?", tag), (name, image)
    assert images["grafana"] == "grafana/grafana:11.6.16"  # a patch of the SDK flavour (11.6)
    assert images["mlflow"].startswith("ghcr.io/mlflow/mlflow:v3.17.")
    assert images["alert-log"] == "python:3.11.16-slim-bookworm"


def test_every_service_has_a_healthcheck(services):
    for name, service in services.items():
        if name in ("monitor",):  # from the Dockerfile's HEALTHCHECK
            assert "healthcheck" not in service
            continue
        if name == "demo":  # a writer with no port
            assert service["healthcheck"] == {"disable": True}
            continue
        check = service["healthcheck"]["test"]
        assert check[0] == "CMD"
        port = _container_port(service) if "ports" in service else 9095  # alert-log: internal
        assert f"127.0.0.1:{port}/" in " ".join(check), name
    assert "HEALTHCHECK" in DOCKERFILE.read_text()
    assert services["grafana"]["depends_on"] == {"prometheus": {"condition": "service_healthy"}}


def test_every_bind_mount_exists_in_the_repo(services):
    for name, service in services.items():
        for target, source in _mounts(service).items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) is missing"
            assert REPO in source.parents


def test_named_volumes_are_declared(compose, services):
    used = set().union(*(_named_volumes(s) for s in services.values()))
    assert used == set(compose["volumes"])


def test_monitor_service_runs_the_example_config(services):
    monitor = services["monitor"]
    assert monitor["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert _mounts(monitor)["/etc/fairmonitor/monitor.yaml"] == EXAMPLE_CONFIG
    assert "monitor-data" in _named_volumes(monitor)
    assert _container_port(monitor) == 9464


def test_example_config_fits_the_stack(example_config, services):
    assert example_config.port == 9464
    assert example_config.host == "0.0.0.0"
    for model in example_config.models.values():
        assert model.tracking_uri == "http://mlflow:5000"
        assert model.source.url.startswith("sqlite:////data/")  # the monitor-data volume
    assert str(example_config.checkpoint.path).startswith("/data/")
    mlflow = services["mlflow"]
    assert _container_port(mlflow) == 5000
    assert "--allowed-hosts=mlflow:5000,localhost:*,127.0.0.1:*" in mlflow["command"]


def test_prometheus_scrapes_the_monitor_and_itself(services):
    for path in (PROMETHEUS, PROMETHEUS_GRAFANA):
        config = read_yaml(path)
        targets = {job["job_name"]: job["static_configs"][0]["targets"]
                   for job in config["scrape_configs"]}
        # the job name FairmonitorDown watches, and the self-scrape the rule-failure alert reads
        assert targets == {"fairmonitor": [f"monitor:{_container_port(services['monitor'])}"],
                           "prometheus": ["localhost:9090"]}


def test_default_path_sends_to_alertmanager_only(services):
    config = read_yaml(PROMETHEUS)
    (am,) = config["alerting"]["alertmanagers"]
    assert am["static_configs"][0]["targets"] == [
        f"alertmanager:{_container_port(services['alertmanager'])}"]
    assert _mounts(services["alertmanager"])["/etc/alertmanager/alertmanager.yml"] == (
        ALERTMANAGER)
    # Grafana-managed alerting is not provisioned by default: no double pages
    assert not (DASHBOARDS / "provisioning" / "alerting").exists()
    assert all(not target.startswith("/etc/grafana/provisioning/alerting")
               for target in _mounts(services["grafana"]))


def test_grafana_alerting_variant_replaces_alertmanager():
    override = read_yaml(GRAFANA_ALERTING_COMPOSE)["services"]
    assert override["alertmanager"] == {"scale": 0}
    assert "--config.file=/etc/prometheus/prometheus.grafana-alerting.yml" in (
        override["prometheus"]["command"])
    assert _mounts(override["prometheus"]) == {
        "/etc/prometheus/prometheus.grafana-alerting.yml": PROMETHEUS_GRAFANA}
    assert "alerting" not in read_yaml(PROMETHEUS_GRAFANA)
    assert _mounts(override["grafana"]) == {
        "/etc/grafana/provisioning/alerting": DASHBOARDS / "grafana-alerting"}
    assert "FAIRMONITOR_WEBHOOK_URL" in override["grafana"]["environment"]
    base = {k: v for k, v in read_yaml(PROMETHEUS).items() if k != "alerting"}
    assert read_yaml(PROMETHEUS_GRAFANA) == base


def test_alertmanager_config_is_valid(tmp_path):
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.fail("amtool not found: install Debian's `prometheus-alertmanager` package")
    result = run_promtool(amtool, "check-config", str(ALERTMANAGER))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 inhibit rules" in result.stdout


@pytest.mark.parametrize(("labels", "receiver"), [
    (["alertname=FairnessThresholdBreached", "team=risk", "severity=critical"],
     "risk-team-page"),
    (["alertname=FairnessThresholdBreached", "team=risk", "severity=warning"], "risk-team"),
    (["alertname=FairnessThresholdBreached", "model=fraud", "severity=warning"],
     "fraud-model"),
    (["alertname=FairmonitorDown", "instance=monitor:9464", "severity=critical"],
     "monitoring-oncall"),
    # model-level health reaches the monitoring on-call AND the model's team (issue 24)
    (["alertname=FairnessMetricUndefined", "model=credit", "severity=warning"],
     "monitoring-oncall,fairness-default"),
])
def test_alertmanager_routes_by_team_and_model(labels, receiver):
    amtool = shutil.which("amtool")
    result = run_promtool(amtool, "config", "routes", "test",
                          "--config.file", str(ALERTMANAGER), *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_critical_inhibits_the_warning_of_the_same_series():
    rules = read_yaml(ALERTMANAGER)["inhibit_rules"]
    assert rules[0] == {
        "source_matchers": ['alertname="FairnessThresholdBreached"', 'severity="critical"'],
        "target_matchers": ['alertname="FairnessThresholdBreached"', 'severity="warning"'],
        "equal": ["model", "metric", "sensitive_attribute"]}
    receivers = {r["name"] for r in read_yaml(ALERTMANAGER)["receivers"]}
    for r in read_yaml(ALERTMANAGER)["receivers"]:
        (hook,) = r["webhook_configs"]
        assert hook["url"] == f"http://alert-log:9095/{r['name']}"
    assert len(receivers) == 5
    # resolves are sent: explicit, not Alertmanager's webhook default
    assert all(r["webhook_configs"][0]["send_resolved"] is True
               for r in read_yaml(ALERTMANAGER)["receivers"])


def test_alert_log_prints_each_notification(capfd):
    """docker/alert_log.py: a real POST of an Alertmanager payload, one JSON line per alert."""
    import importlib.util
    import json
    import threading
    import urllib.request
    from http.server import ThreadingHTTPServer

    spec = importlib.util.spec_from_file_location("alert_log", DOCKER / "alert_log.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = ThreadingHTTPServer(("127.0.0.1", 0), module._Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        payload = {"alerts": [{"status": "firing", "labels": {
            "alertname": "FairnessThresholdBreached", "model": "credit"},
            "annotations": {"summary": "abcc above"}}]}
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/risk-team",
            data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    (line,) = capfd.readouterr().out.splitlines()
    assert json.loads(line) == {"receiver": "risk-team", "status": "firing",
                                "alertname": "FairnessThresholdBreached",
                                "labels": {"alertname": "FairnessThresholdBreached",
                                           "model": "credit"},
                                "summary": "abcc above"}


def test_prometheus_loads_the_generated_rules(services):
    config = read_yaml(PROMETHEUS)
    mounts = _mounts(services["prometheus"])
    assert mounts["/etc/prometheus/prometheus.yml"] == PROMETHEUS
    (rule_file,) = config["rule_files"]
    rules = DASHBOARDS / "alerts" / "fairmonitor.rules.yml"
    assert mounts[f"/etc/prometheus/{rule_file}"] == rules
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]


def test_promtool_check_config(promtool, tmp_path):
    """`promtool check config` with the rules where the container has them (rules/)."""
    shutil.copy(PROMETHEUS, tmp_path / "prometheus.yml")
    (tmp_path / "rules").mkdir()
    shutil.copy(DASHBOARDS / "alerts" / "fairmonitor.rules.yml", tmp_path / "rules")
    result = run_promtool(promtool, "check", "config", str(tmp_path / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 18 rules found" in result.stdout


def test_grafana_is_provisioned_and_private(services):
    grafana = services["grafana"]
    env = grafana["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    mounts = _mounts(grafana)
    assert mounts["/etc/grafana/provisioning"] == PROVISIONING
    assert mounts[f"{DASHBOARD_DIR}/fairmonitor.json"] == DASHBOARDS / "fairmonitor.json"
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == f"{DASHBOARD_DIR}/fairmonitor.json"
    assert _container_port(grafana) == 3000


def test_provisioning_files_are_up_to_date(tmp_path):
    from fairmonitor.alerting.provisioning import write_dashboards

    for path in write_dashboards(tmp_path):
        committed = DASHBOARDS / path.relative_to(tmp_path)
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed.relative_to(REPO)} is stale: run `fairmonitor dashboards --out "
            "dashboards`")
    assert read_yaml(PROVISIONING / "datasources" / "fairmonitor.yaml") == (
        datasource_provisioning())
    assert read_yaml(PROVISIONING / "dashboards" / "fairmonitor.yaml") == (
        dashboard_provisioning())
    assert sorted(p.name for p in PROVISIONING.iterdir()) == ["dashboards", "datasources"]


def test_datasource_points_at_the_prometheus_service(services):
    (datasource,) = read_yaml(PROVISIONING / "datasources" / "fairmonitor.yaml")["datasources"]
    assert datasource["url"] == f"http://prometheus:{_container_port(services['prometheus'])}"
    assert (datasource["type"], datasource["access"]) == ("prometheus", "proxy")


def test_dashboard_provider_reads_the_mounted_dashboard():
    (provider,) = read_yaml(PROVISIONING / "dashboards" / "fairmonitor.yaml")["providers"]
    assert provider["options"]["path"] == DASHBOARD_DIR
    assert provider["type"] == "file"


def test_dockerfile():
    text = DOCKERFILE.read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith("#")]
    # both stages (the kernels' build, the runtime) on the same pinned interpreter and OS
    stages = [line for line in instructions if line.startswith("FROM ")]
    assert stages == ["FROM python:3.11.16-slim-bookworm AS kernels",
                      "FROM python:3.11.16-slim-bookworm"]
    (user,) = re.findall(r"^USER (\S+)$", text, re.M)
    assert user not in ("root", "0")
    assert re.search(r"^RUN pip install --constraint /src/docker/constraints.txt /src", text,
                     re.M)
    assert re.search(r"^EXPOSE 9464$", text, re.M)
    healthcheck = re.search(r"^HEALTHCHECK .*\n.*$", text, re.M).group(0)
    assert "urllib.request.urlopen('http://127.0.0.1:9464/metrics'" in healthcheck
    assert ('ENTRYPOINT ["fairmonitor", "monitor", "--config", '
            '"/etc/fairmonitor/monitor.yaml"]') in text
    assert 'CMD ["--web.listen-address", "0.0.0.0:9464"]' in text


def test_dockerfile_copies_what_pip_install_needs():
    text = DOCKERFILE.read_text()
    for path in re.findall(r"^COPY (?!--from)(.+) /src/?\S*$", text, re.M):
        for part in path.split():
            assert (REPO / part).exists(), part
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    assert "*" in ignore
    for needed in ("pyproject.toml", "setup.py", "README.md", "fairmonitor/", "plugins/",
                   "docker/constraints.txt"):
        assert f"!{needed}" in ignore


def test_constraints_pin_every_dependency_exactly():
    lines = [line for line in (DOCKER / "constraints.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[\w.!+]+", line) for line in lines), lines
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in lines}
    assert {"mlflow", "numpy", "scipy", "pandas", "scikit-learn", "apscheduler",
            "prometheus-client", "pyyaml", "matplotlib"} <= pinned


def test_demo_writes_what_the_example_config_reads(example_config, tmp_path):
    """The demo's predictions evaluate under the example config (no Docker needed)."""
    import importlib.util
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from fairmonitor.monitor.job import evaluate_model_window
    from fairmonitor.monitor.sources import SQLSource
    from fairmonitor.monitor.sources.logger import PredictionLogger

    spec = importlib.util.spec_from_file_location("demo", DOCKER / "demo_predictions.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    end = datetime(2026, 11, 22, 3, tzinfo=UTC)
    loggers = {"credit": PredictionLogger(url, model="credit", version="1",
                                          sensitive_features=["sex", "age_group"]),
               "fraud": PredictionLogger(url, model="fraud", version="1",
                                         sensitive_features=["region"],
                                         table="fraud_predictions")}
    rows = demo.log_between(loggers, np.random.default_rng(0), end - timedelta(hours=1), end,
                            per_minute=20)
    assert rows == 2 * 1200
    for name, model in example_config.models.items():
        loggers[name].close()
        source = SQLSource(url, model.source.table)
        result = evaluate_model_window(model, source, end - model.window, end, now=end)
        source.close()
        assert result.errors == {}
        assert result.n_rows == 1200
        assert set(result.report.values) >= {(m, a) for m in model.label_free_metrics
                                            for a in model.sensitive_features}


def test_dockerfile_compiles_the_kernels_at_build_and_checks_them_as_the_runtime_user():
    """A container's first window compiles nothing (issue 27): the kernels are compiled into
    a wheel in a build stage that has the C compiler, the runtime stage installs that wheel
    (no compiler in the image), and ``fairmonitor warm`` checks, as the user that runs the
    monitor, that every kernel loads."""
    text = DOCKERFILE.read_text()
    build, runtime = text.split("\nFROM python:3.11.16-slim-bookworm\n")
    assert "gcc" in build and "RUN pip wheel --no-deps --wheel-dir /wheels /src" in build
    assert "COPY pyproject.toml setup.py README.md /src/" in build
    assert "gcc" not in runtime and "NUMBA_CACHE_DIR" not in text
    lines = [line for line in runtime.splitlines() if line and not line.startswith("#")]
    wheel = lines.index("COPY --from=kernels /wheels /src/wheels")
    install = next(i for i, line in enumerate(lines)
                   if line.startswith("RUN pip install") and "/src/wheels/fairmonitor-" in line)
    user = next(i for i, line in enumerate(lines) if line.startswith("USER "))
    warm = lines.index("RUN fairmonitor warm")
    entry = next(i for i, line in enumerate(lines) if line.startswith("ENTRYPOINT"))
    assert wheel < install < user < warm < entry
