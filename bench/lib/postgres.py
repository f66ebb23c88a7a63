"""A throwaway PostgreSQL with the TechEmpower tables, for bench/workloads/run and the end-to-end tests.

    with Postgres() as pg:          # initdb in a fresh temporary directory, start, load the tables
        pg.dsn                      # postgresql://bench@127.0.0.1:PORT/hello_world
        pg.psql("SELECT 1")         # a statement through psql, its unaligned output
    # stopped (fast shutdown) and its directory removed; also at interpreter exit if never left

It runs Debian's server binaries (/usr/lib/postgresql/N/bin, the newest N, else `postgres` on the PATH)
on a free TCP port of 127.0.0.1 with its unix socket inside its own directory, trust authentication for
the superuser `bench`, and durability switched off (fsync, synchronous_commit, full_page_writes): a crash
may lose or corrupt the data, which is regenerated at every start anyway, and the benchmarks measure the
web servers, not the disk. PostgreSQL refuses to run as root, so under euid 0 the server and initdb run
as the `postgres` system user of Debian's package (or `nobody`), which owns the directory.

Tables, as the test types define them: World(id, randomnumber) with 10,000 rows of random numbers
1..10000, and Fortune(id, message) with the 12 fortunes of the benchmark. Standard library only, so that
both the bench venv and the test venvs can import it by path.
"""
from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DATABASE = "hello_world"
SUPERUSER = "bench"
WORLD_ROWS = 10_000

FORTUNES = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. — Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "フレームワークのベンチマーク"),
]


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


SCHEMA_SQL = f"""
CREATE TABLE World (id integer PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0);
INSERT INTO World (id, randomnumber)
    SELECT n, 1 + floor(random() * {WORLD_ROWS})::integer FROM generate_series(1, {WORLD_ROWS}) AS n;
CREATE TABLE Fortune (id integer PRIMARY KEY, message varchar(2048) NOT NULL);
INSERT INTO Fortune (id, message) VALUES
    {(',' + chr(10) + '    ').join(f'({i}, {_sql_string(m)})' for i, m in FORTUNES)};
VACUUM ANALYZE;
"""


def bin_dir() -> Path | None:
    """The directory of Debian's PostgreSQL server binaries (the newest version), or None when absent."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: [int(x) for x in Path(p).parent.parent.name.split(".") if x.isdigit()])
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(os.path.realpath(on_path)).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """One PostgreSQL server of its own; see the module's docstring."""

    def __init__(self, max_connections: int = 200, port: int | None = None, shared_buffers: str = "128MB"):
        self.bin = bin_dir()
        if self.bin is None:
            raise FileNotFoundError("PostgreSQL's server binaries are not installed (Debian: apt-get install postgresql)")
        self.max_connections = max_connections
        self.shared_buffers = shared_buffers
        self.port = port
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._run_as: dict = {}

    # -- addresses -------------------------------------------------------------
    @property
    def dsn(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def log_path(self) -> Path:
        return self.dir / "postgres.log"

    def version(self) -> str:
        return subprocess.run([str(self.bin / "postgres"), "--version"], capture_output=True, text=True).stdout.strip()

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> "Postgres":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> "Postgres":
        self.dir = Path(tempfile.mkdtemp(prefix="peregrine-pg-"))
        atexit.register(self.stop)
        if os.geteuid() == 0:
            # PostgreSQL will not run as root: Debian's package created a `postgres` system user.
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                account = pwd.getpwnam("nobody")
            os.chown(self.dir, account.pw_uid, account.pw_gid)
            self._run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        data = self.dir / "data"
        init = subprocess.run([str(self.bin / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
                               "-E", "UTF8", "--locale=C", "--no-sync"],
                              capture_output=True, text=True, timeout=timeout, **self._run_as)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}):\n{init.stdout[-2000:]}{init.stderr[-2000:]}")
        self.port = self.port or _free_port()
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(self.port), "-k", str(self.dir),
             "-c", f"max_connections={self.max_connections}", "-c", f"shared_buffers={self.shared_buffers}",
             # Durability off: the data is regenerated at every start (see the module's docstring).
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "logging_collector=off", "-c", "log_min_messages=warning"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            **self._run_as)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with status {self.proc.returncode}:\n{self._log_tail()}")
            ready = subprocess.run([str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port),
                                    "-U", SUPERUSER, "-d", "postgres"], capture_output=True)
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections within {timeout:.0f} s:\n{self._log_tail()}")
            time.sleep(0.1)
        self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        self.psql(SCHEMA_SQL)
        return self

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients are disconnected), SIGKILL to its process group after 15 s; then the
        directory is removed. Safe to call more than once."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.proc.wait(5)
            self.proc = None
        if self._log:
            self._log.close()
            self._log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- statements --------------------------------------------------------------
    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Runs SQL through psql (stops at the first error) and returns its unaligned, tuples-only output."""
        out = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                              "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database],
                             input=sql, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed ({out.returncode}): {out.stderr[-2000:]}")
        return out.stdout


if __name__ == "__main__":
    # A manual check: start, show the tables' sizes, stop.
    with Postgres() as pg:
        print(pg.version(), pg.dsn)
        print(pg.psql("SELECT count(*), min(randomnumber), max(randomnumber) FROM World; "
                      "SELECT count(*) FROM Fortune; SELECT message FROM Fortune WHERE id = 12;"))
