"""The embedded PostgreSQL launcher: its own cluster, separate from the session's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from runtime.store.embedded import EmbeddedPostgres, EmbeddedPostgresError, main

IS_ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def base_dir() -> Iterator[Path]:
    """A temporary dir the unprivileged server account can traverse."""
    base = Path(tempfile.mkdtemp(prefix="wf-launcher-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(base_dir: Path) -> Iterator[EmbeddedPostgres]:
    """A launcher-owned cluster, stopped at the end of the module."""
    embedded = EmbeddedPostgres(base_dir / "pg", database="app", fast=True)
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()


def query(url: str, statement: str) -> object:
    with psycopg.connect(url) as conn:
        row = conn.execute(statement).fetchone()
    assert row is not None
    return row[0]


def test_the_url_reaches_the_created_application_database_over_a_socket(
    cluster: EmbeddedPostgres,
) -> None:
    url = cluster.url()
    assert url.startswith("postgresql://postgres@/app?host=")
    assert query(url, "SELECT current_database()") == "app"
    assert query(url, "SHOW listen_addresses") == ""
    assert query(url, "SHOW fsync") == "off"


@pytest.mark.skipif(not IS_ROOT, reason="only root has to hand the server to another account")
def test_as_root_the_server_runs_as_the_postgres_account(cluster: EmbeddedPostgres) -> None:
    server = cluster.running_server()
    assert server is not None
    status = Path(f"/proc/{server.pid}/status").read_text(encoding="utf-8")
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    assert uid_line.split()[1] == str(__import__("pwd").getpwnam("postgres").pw_uid)
    assert (cluster.data_dir / "PG_VERSION").stat().st_uid != 0


def test_a_second_launcher_reuses_the_running_cluster(cluster: EmbeddedPostgres) -> None:
    again = EmbeddedPostgres(cluster.data_dir, database="app")
    url = again.start()
    assert again.reused
    assert again.running_server() == cluster.running_server()
    assert query(url, "SELECT 1") == 1


def test_stop_then_start_keeps_the_data(cluster: EmbeddedPostgres) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS kept (v int)")
        conn.execute("INSERT INTO kept VALUES (7)")
    cluster.stop()
    assert cluster.running_server() is None
    cluster.start()
    assert not cluster.reused
    assert query(cluster.url(), "SELECT sum(v) FROM kept") == 7


def test_the_cli_reports_status_url_and_stops_and_starts(
    cluster: EmbeddedPostgres, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = str(cluster.data_dir)
    assert main(["status", "--data-dir", data_dir]) == 0
    assert main(["url", "--data-dir", data_dir]) == 0
    assert main(["stop", "--data-dir", data_dir]) == 0
    assert main(["status", "--data-dir", data_dir]) == 3
    assert main(["url", "--data-dir", data_dir]) == 1
    assert main(["start", "--data-dir", data_dir, "--fast"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("running (pid ")
    assert out[1].startswith("postgresql://postgres@/workflow?host=")
    assert out[2] == "stopped"
    assert out[3].startswith("postgresql://postgres@/workflow?host=")
    assert cluster.running_server() is not None


@pytest.mark.skipif(not IS_ROOT, reason="needs root to make the unreachable path")
def test_a_data_dir_the_server_account_cannot_reach_is_refused_clearly(tmp_path: Path) -> None:
    private = Path(tempfile.mkdtemp(prefix="wf-private-"))
    try:
        with pytest.raises(EmbeddedPostgresError, match="not searchable by the 'postgres'"):
            EmbeddedPostgres(private / "pg").start()
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to become an ordinary user")
def test_an_ordinary_user_runs_the_server_without_changing_account(base_dir: Path) -> None:
    # The interpreter lives where only root can read, so the child imports everything it
    # needs before dropping to the ordinary 'postgres' account.
    data_dir = base_dir / "ordinary"
    data_dir.mkdir(mode=0o777)
    data_dir.chmod(0o777)
    script = f"""
import os, pwd, psycopg
from runtime.store.embedded import EmbeddedPostgres
account = pwd.getpwnam("postgres")
os.setgroups([]); os.setgid(account.pw_gid); os.setuid(account.pw_uid)
cluster = EmbeddedPostgres({str(data_dir / "pg")!r}, fast=True)
try:
    with psycopg.connect(cluster.start()) as conn:
        print(conn.execute("SELECT current_user").fetchone()[0], os.geteuid())
finally:
    cluster.stop()
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert result.returncode == 0, result.stderr
    user, euid = result.stdout.split()
    assert user == "postgres" and euid != "0"


def test_a_long_data_dir_path_gets_a_short_private_socket_dir(base_dir: Path) -> None:
    # Unix socket paths are limited to ~107 bytes, so a deep data dir cannot hold the socket.
    deep = base_dir / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    for directory in (deep, deep.parent):
        directory.chmod(0o755)
    cluster = EmbeddedPostgres(deep / "pg", fast=True)
    cluster.start()
    try:
        server = cluster.running_server()
        assert server is not None
        assert len(server.socket_dir) < 80
        assert query(cluster.url(), "SELECT 1") == 1
    finally:
        cluster.stop()
    assert not Path(server.socket_dir).exists()
