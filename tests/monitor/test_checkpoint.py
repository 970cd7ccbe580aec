from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from fairmonitor.monitor.checkpoint import (
    Checkpoint,
    FileCheckpoint,
    MemoryCheckpoint,
    ModelState,
    SQLCheckpoint,
    open_checkpoint,
)
from fairmonitor.monitor.config import CheckpointConfig

T0 = datetime(2026, 11, 22, tzinfo=UTC)
STATE = ModelState(T0, T0 - timedelta(hours=24), frozenset({"3", "10"}))


@pytest.fixture(params=["memory", "file", "sqlite"])
def make_store(request, tmp_path):
    def make() -> Checkpoint:
        if request.param == "memory":
            return shared
        if request.param == "file":
            return FileCheckpoint(tmp_path / "sub" / "cp.json")
        return SQLCheckpoint(f"sqlite:///{tmp_path / 'cp.db'}")

    shared = MemoryCheckpoint()
    return make


def test_round_trip_survives_a_new_instance(make_store):
    make_store().save("credit", STATE)
    other = make_store()  # a restarted monitor
    assert other.load("credit") == STATE
    assert other.load("fraud") == ModelState()


def test_save_replaces_one_model_only(make_store):
    store = make_store()
    store.save("credit", STATE)
    store.save("fraud", ModelState(T0))
    store.save("credit", ModelState(T0 + timedelta(hours=1)))
    again = make_store()
    assert again.load("credit") == ModelState(T0 + timedelta(hours=1))
    assert again.load("fraud") == ModelState(T0)


def test_postgres_checkpoint(postgres_url):
    store = SQLCheckpoint(postgres_url, table="cp_test")
    store.save("credit", STATE)
    store.save("credit", STATE)
    assert SQLCheckpoint(postgres_url, table="cp_test").load("credit") == STATE
    store.close()


def test_file_checkpoint_is_json_and_atomic(tmp_path, monkeypatch):
    path = tmp_path / "cp.json"
    store = FileCheckpoint(path)
    store.save("credit", STATE)
    data = json.loads(path.read_text())
    # format 2 (issue 28): each entry names its model and carries the SHA-256 of its content
    entry = {"labels_end": "2026-11-21T00:00:00+00:00",
             "predictions_end": "2026-11-22T00:00:00+00:00",
             "versions": ["3", "10"], "model": "credit"}
    digest = hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":"))
                            .encode()).hexdigest()
    assert data == {"format": 2, "models": {"credit": {**entry, "checksum": digest}}}

    def crash(*args):
        raise OSError("disk full")

    # a crash between writing the temp file and renaming it leaves the old checkpoint whole
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        store.save("credit", ModelState(T0 + timedelta(days=1)))
    monkeypatch.undo()
    assert FileCheckpoint(path).load("credit") == STATE
    assert [p.name for p in tmp_path.iterdir()] == ["cp.json"]


def test_open_checkpoint_from_config(tmp_path):
    assert isinstance(open_checkpoint(CheckpointConfig("file", path=tmp_path / "c.json")),
                      FileCheckpoint)
    store = open_checkpoint(CheckpointConfig("sql", url=f"sqlite:///{tmp_path / 'c.db'}"))
    assert isinstance(store, SQLCheckpoint)
    store.close()
