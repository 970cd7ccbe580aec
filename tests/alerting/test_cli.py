"""`fairmonitor rules` and `fairmonitor dashboards` write exactly the committed artefacts."""

from __future__ import annotations

import builtins

import pytest

from fairmonitor.cli import SUBCOMMANDS, main

from .conftest import DASHBOARDS, EXAMPLE_CONFIG, RUNBOOK_URL

GENERATED = ("alerts/fairmonitor.rules.yml", "grafana-alerting/fairmonitor.yaml")
GRAFANA = ["--grafana-url", "http://localhost:3000", "--runbook-url", RUNBOOK_URL]
DASHBOARD_FILES = ("fairmonitor.json", "provisioning/datasources/fairmonitor.yaml",
                   "provisioning/dashboards/fairmonitor.yaml")


def test_subcommands_are_registered():
    assert SUBCOMMANDS["rules"][0] == "fairmonitor.commands.rules"
    assert SUBCOMMANDS["dashboards"][0] == "fairmonitor.commands.dashboards"


def test_rules_writes_the_committed_files(tmp_path, capsys):
    assert main(["rules", "--config", str(EXAMPLE_CONFIG), "--out", str(tmp_path),
                 *GRAFANA]) == 0
    for name in GENERATED:
        assert (tmp_path / name).read_text() == (DASHBOARDS / name).read_text(), name
    assert capsys.readouterr().out.count("wrote ") == 2


def test_rules_options(tmp_path):
    code = main(["rules", "--config", str(EXAMPLE_CONFIG), "--out", str(tmp_path),
                 "--for-health", "1h", "--stale-after", "5", "--hold-missing", "30m",
                 "--keep-firing-for", "10m", "--scrape-job", "fm",
                 "--runbook-url", "https://git.example.org/fm/docs/runbook.md",
                 "--grafana-url", "https://grafana.example.org"])
    assert code == 0
    text = (tmp_path / GENERATED[0]).read_text()
    assert "    for: 1h\n" in text
    assert "    keep_firing_for: 10m\n" in text
    assert "5 * fairmonitor:window_cadence_seconds" in text
    assert "last_over_time(fairmonitor_breach_windows{severity=\"warning\"}[30m])" in text
    assert 'up{job=~"fm"} == 0' in text
    assert "https://grafana.example.org/d/fairmonitor/fairmonitor" in text
    assert "runbook_url: https://git.example.org/fm/docs/runbook.md#fairmonitordown" in text


@pytest.mark.parametrize("flag", ["--grafana-url", "--runbook-url"])
def test_rules_requires_the_link_bases(tmp_path, capsys, flag):
    """Both link bases are required: no relative runbook default (issue 24)."""
    given = [a for i, a in enumerate(GRAFANA) if flag not in GRAFANA[i - (i % 2):i + 1]]
    assert flag not in given and len(given) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["rules", "--config", str(EXAMPLE_CONFIG), "--out", str(tmp_path), *given])
    assert exit_info.value.code == 2
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--for-health", "soon"], "--for-health: must be a duration like"),
    (["--stale-after", "0"], "stale_after: must be an integer >= 1"),
    # issue 24: the monitor counts the windows; the old flags say where the setting went
    (["--windows-critical", "1"], "--windows-critical: the monitor counts alert windows now; "
                                  "set models.<name>.alert_windows.critical: 1 in the monitor "
                                  "config instead"),
    (["--hold-missing", "0s"], "hold_missing: must be at least 1s"),
    (["--grafana-url", "grafana:3000"], "grafana_url: must be an absolute http(s) URL"),
    (["--grafana-url", "http:///d"], "grafana_url: must be an absolute http(s) URL"),
    (["--grafana-url", "https://g.example.org/?orgId=2"], "grafana_url: must not contain a '?"),
    (["--runbook-url", "docs/runbook.md"], "runbook_url: must be an absolute http(s) URL"),
    (["--runbook-url", "file:///srv/runbook.md"], "runbook_url: must be an absolute http(s)"),
    (["--runbook-url", "https://wiki.example.org/rb#top"], "runbook_url: must not contain a '#"),
])
def test_rules_bad_option_exits_2(tmp_path, capsys, args, message):
    assert main(["rules", "--config", str(EXAMPLE_CONFIG), "--out", str(tmp_path), *GRAFANA,
                 *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "alerts").exists()


def test_rules_invalid_config_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE_CONFIG.read_text().replace("window: 1h", "window: soon", 1))
    assert main(["rules", "--config", str(bad), "--out", str(tmp_path), *GRAFANA]) == 2
    assert "models.credit.window" in capsys.readouterr().err


def test_dashboards_writes_the_committed_files(tmp_path, capsys):
    assert main(["dashboards", "--out", str(tmp_path)]) == 0
    for name in DASHBOARD_FILES:
        assert (tmp_path / name).read_text() == (DASHBOARDS / name).read_text(), name
    assert capsys.readouterr().out.count("wrote ") == 3


def test_dashboards_without_the_sdk_says_what_to_install(tmp_path, capsys, monkeypatch):
    import sys

    real_import = builtins.__import__

    def no_sdk(name, *args, **kwargs):
        if name.startswith("grafana_foundation_sdk"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "fairmonitor.alerting.dashboard", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_sdk)
    assert main(["dashboards", "--out", str(tmp_path)]) == 1
    assert "pip install 'fairmonitor[dashboards]'" in capsys.readouterr().err
