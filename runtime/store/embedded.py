"""Embedded PostgreSQL: a private cluster under a data dir, reached only by a Unix socket.

With no DATABASE_URL the service and the tests run their own cluster: ``initdb`` once, then
``pg_ctl start`` with ``listen_addresses=''`` so nothing listens on TCP. PostgreSQL refuses to
run as root, so when we are root the server binaries run as an unprivileged account (Debian's
``postgres``) that owns the data dir; as an ordinary user they run as that user.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import psycopg
from psycopg import sql

from runtime.store.settings import StoreSettings

DEFAULT_DATABASE = "workflow"
DEFAULT_SUPERUSER = "postgres"
DEFAULT_PORT = 5432
UNPRIVILEGED_ACCOUNT = "postgres"
# sun_path holds 108 bytes; ".s.PGSQL.NNNNN" plus its ".lock" sibling must fit after the dir.
_MAX_SOCKET_DIR_LENGTH = 80
_SHORT_SOCKET_PREFIX = "wfpg-"
_INCLUDE_FILE = "embedded.conf"
_LOG_FILE = "postmaster.log"
_START_TIMEOUT_S = 60
_FAST_OPTIONS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class EmbeddedPostgresError(RuntimeError):
    """The embedded cluster could not be created, started, stopped or reached."""


@dataclass(frozen=True)
class RunningServer:
    """Where a running postmaster of a data dir can be reached (from postmaster.pid)."""

    pid: int
    port: int
    socket_dir: str


def find_bindir() -> Path:
    """The directory holding initdb/pg_ctl: $PG_BINDIR, `pg_config --bindir`, or the newest
    /usr/lib/postgresql/*/bin."""
    candidates: list[Path] = []
    if env_dir := os.environ.get("PG_BINDIR"):
        candidates.append(Path(env_dir))
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            ).stdout.strip()
            candidates.append(Path(out))
    versioned = glob.glob("/usr/lib/postgresql/*/bin")
    candidates.extend(Path(p) for p in sorted(versioned, key=_major_version, reverse=True))
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise EmbeddedPostgresError("no PostgreSQL server binaries found (initdb, pg_ctl)")


def _major_version(bindir: str) -> int:
    name = Path(bindir).parent.name
    return int(name) if name.isdigit() else 0


def read_postmaster_pid(data_dir: Path) -> RunningServer | None:
    """The pid, port and socket dir recorded in postmaster.pid, if the file is readable."""
    try:
        lines = (data_dir / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        # Layout (pidfile.h): pid, data dir, start time, port, socket dir, listen addr, ...
        return RunningServer(pid=int(lines[0]), port=int(lines[3]), socket_dir=lines[4].strip())
    except (OSError, IndexError, ValueError):
        return None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EmbeddedPostgres:
    """A PostgreSQL cluster under data_dir with a private Unix socket and no TCP listener."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        database: str = DEFAULT_DATABASE,
        port: int = DEFAULT_PORT,
        fast: bool = False,
        superuser: str = DEFAULT_SUPERUSER,
        bindir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.database = database
        self.port = port
        self.fast = fast
        self.superuser = superuser
        self._bindir = Path(bindir) if bindir is not None else None
        self._server: RunningServer | None = None
        self.reused = False

    # -- public API ---------------------------------------------------------------------------

    @property
    def bindir(self) -> Path:
        """The directory of the server binaries in use."""
        if self._bindir is None:
            self._bindir = find_bindir()
        return self._bindir

    def start(self) -> str:
        """Start the cluster (initdb first if needed) or reuse a running one; return url()."""
        running = self.running_server()
        if running is not None:
            self._server = running
            self.reused = True
        else:
            self._prepare_data_dir()
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb()
            self._server = self._pg_ctl_start()
            self.reused = False
        self.ensure_database(self.database)
        return self.url()

    def stop(self) -> None:
        """Stop the cluster with a fast shutdown (rolls back open transactions)."""
        server = self.running_server()
        self._server = None
        if server is None:
            return
        self._run_server_tool(
            [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast", "-w"]
        )
        socket_dir = Path(server.socket_dir)
        if socket_dir != self.data_dir and socket_dir.name.startswith(_SHORT_SOCKET_PREFIX):
            shutil.rmtree(socket_dir, ignore_errors=True)

    def restart(self, mode: str = "fast") -> None:
        """Restart the running cluster; mode "immediate" is a crash and recovery (fault tests).

        Its log goes where start's went, so pg_ctl leaves no pipe of ours open in the server.
        """
        self._run_server_tool(
            [
                str(self.bindir / "pg_ctl"),
                "restart",
                "-D",
                str(self.data_dir),
                "-m",
                mode,
                "-l",
                str(self.data_dir / _LOG_FILE),
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
            ]
        )
        self._server = self.running_server()
        if self._server is None:
            raise EmbeddedPostgresError(f"cluster on {self.data_dir} did not come back")

    def running_server(self) -> RunningServer | None:
        """The live postmaster of this data dir, or None."""
        server = read_postmaster_pid(self.data_dir)
        if server is None or not _process_alive(server.pid):
            return None
        return server

    def url(self, database: str | None = None) -> str:
        """A libpq URL for database (default: the application database) over the socket."""
        server = self._server or self.running_server()
        if server is None:
            raise EmbeddedPostgresError(f"no cluster running on {self.data_dir}")
        name = quote(database or self.database, safe="")
        host = quote(server.socket_dir, safe="")
        return (
            f"postgresql://{quote(self.superuser, safe='')}@/{name}?host={host}&port={server.port}"
        )

    def admin_url(self) -> str:
        """A URL for the maintenance database `postgres`."""
        return self.url("postgres")

    def ensure_database(self, name: str) -> None:
        """Create database name if it does not exist."""
        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if found is None:
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- privileges ---------------------------------------------------------------------------

    def _server_account(self) -> pwd.struct_passwd | None:
        """The account the server runs as when we are root; None when we are not root."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(UNPRIVILEGED_ACCOUNT)
        except KeyError:
            raise EmbeddedPostgresError(
                f"running as root needs an unprivileged {UNPRIVILEGED_ACCOUNT!r} account"
            ) from None

    def _run_server_tool(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """Run a server binary, as the unprivileged account when we are root."""
        account = self._server_account()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        kwargs: dict[str, object] = {}
        if account is not None:
            env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
            kwargs = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        result = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(
                f"{Path(argv[0]).name} {argv[1] if len(argv) > 1 else ''} failed "
                f"({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
            )
        return result  # type: ignore[no-any-return]

    def _prepare_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        account = self._server_account()
        if account is None:
            return
        _check_traversable(self.data_dir.parent, account)
        if self.data_dir.stat().st_uid != account.pw_uid:
            for root, dirs, files in os.walk(self.data_dir):
                for name in (*dirs, *files):
                    os.lchown(os.path.join(root, name), account.pw_uid, account.pw_gid)
            os.chown(self.data_dir, account.pw_uid, account.pw_gid)
        os.chmod(self.data_dir, 0o700)

    # -- server control -----------------------------------------------------------------------

    def _initdb(self) -> None:
        try:
            self._run_initdb("--locale=C.UTF-8")
        except EmbeddedPostgresError as exc:
            # Some systems lack C.UTF-8; byte-order C is the portable fallback.
            if "locale" not in str(exc):
                raise
            self._run_initdb("--no-locale")
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            # Rewritten at every start: socket dir and fast mode may change between starts.
            conf.write(f"\ninclude_if_exists = '{_INCLUDE_FILE}'\n")

    def _run_initdb(self, locale_option: str) -> None:
        argv = [
            str(self.bindir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.superuser,
            "--auth=trust",
            "--encoding=UTF8",
            locale_option,
            "--no-instructions",
        ]
        if self.fast:
            argv.append("--no-sync")
        self._run_server_tool(argv)

    def _socket_dir(self) -> Path:
        if len(str(self.data_dir)) <= _MAX_SOCKET_DIR_LENGTH:
            return self.data_dir
        short = Path(tempfile.mkdtemp(prefix=_SHORT_SOCKET_PREFIX))
        account = self._server_account()
        if account is not None:
            os.chown(short, account.pw_uid, account.pw_gid)
        return short

    def _write_server_settings(self, socket_dir: Path) -> None:
        lines = [
            "listen_addresses = ''",
            f"unix_socket_directories = '{_conf_quote(str(socket_dir))}'",
            "unix_socket_permissions = 0700",
            f"port = {self.port}",
        ]
        if self.fast:
            lines.extend(option.replace("=", " = ") for option in _FAST_OPTIONS)
        path = self.data_dir / _INCLUDE_FILE
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        account = self._server_account()
        if account is not None:
            os.chown(path, account.pw_uid, account.pw_gid)

    def _pg_ctl_start(self) -> RunningServer:
        self._write_server_settings(self._socket_dir())
        self._run_server_tool(
            [
                str(self.bindir / "pg_ctl"),
                "start",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.data_dir / _LOG_FILE),
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
            ]
        )
        server = self.running_server()
        if server is None:
            raise EmbeddedPostgresError(f"cluster on {self.data_dir} did not stay up")
        return server


def _conf_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "''")


def _check_traversable(directory: Path, account: pwd.struct_passwd) -> None:
    """Fail early, with a clear message, if the server account cannot reach the data dir."""
    for parent in (directory, *directory.parents):
        st = parent.stat()
        if st.st_uid == account.pw_uid or st.st_mode & 0o001:
            continue
        if st.st_gid == account.pw_gid and st.st_mode & 0o010:
            continue
        raise EmbeddedPostgresError(
            f"{parent} is not searchable by the {account.pw_name!r} account; "
            "choose a data dir the server account can reach"
        )


def default_data_dir() -> Path:
    """The embedded data dir of the default store settings: <store.data_dir>/pg."""
    return Path(StoreSettings().data_dir) / "pg"


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: python -m runtime.store.embedded start|stop|status|url [--data-dir DIR]."""
    parser = argparse.ArgumentParser(prog="python -m runtime.store.embedded")
    parser.add_argument("command", choices=["start", "stop", "status", "url"])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--fast", action="store_true", help="fsync off: for tests only")
    args = parser.parse_args(argv)
    cluster = EmbeddedPostgres(args.data_dir or default_data_dir(), fast=args.fast)
    try:
        if args.command == "start":
            print(cluster.start())
        elif args.command == "stop":
            cluster.stop()
        elif args.command == "status":
            server = cluster.running_server()
            print(f"running (pid {server.pid})" if server else "stopped")
            return 0 if server else 3
        else:
            print(cluster.url())
    except EmbeddedPostgresError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
