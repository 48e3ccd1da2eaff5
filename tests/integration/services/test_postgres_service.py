"""The embedded PostgreSQL server's lifecycle and safety (issue #8), on real servers and real processes.

Each test reproduces a fault found by a security and fault review, then checks the promise
of :mod:`workbench.services.postgres`:

* a ``postmaster.pid`` whose pid now belongs to an unrelated process is ignored and that
  process is never signalled;
* a home copied with ``cp -a`` while its server runs gets its own server;
* SIGTERM to a command stops the server it started;
* a second process that needs the DDL lock while an index is built waits, says for whom,
  then reuses the index (no "tuple concurrently updated");
* the socket is in a folder only the server's owner can enter, authentication is ``peer``
  for the home's owner only, so another local user cannot connect (root, too, is refused
  by a normal user's server), and starting as root changes no permission above the home.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from faults import REPO, as_user, is_root, kill_at, other_user, run, user_python

from workbench.engines import pg_client as pg
from workbench.services import postgres

pytestmark = [pytest.mark.pg,  # every test starts embedded servers of its own
              pytest.mark.skipif(bool(os.environ.get("WORKBENCH_PG_DSN", "").strip()),
                                 reason="these tests are about the embedded server; WORKBENCH_PG_DSN names another")]

EXPERIMENT = """
name = "pgsvc"
datasets = ["gita"]
measures = ["R@10"]
depth = 20
[embedders.h]
kind = "hash"
dim = 32
[lanes.fts]
kind = "fulltext"
config = "simple"
[lanes.ref]
kind = "reference"
[configs.fts]
lanes = ["fts"]
[configs.both]
lanes = ["fts", "ref"]
fusion = "rrf"
k = 60
"""


@pytest.fixture
def home(built_home: Path, tmp_path: Path):
    """A fresh home whose built datasets are the session's (no server yet); its server is removed after."""
    h = tmp_path / "home"
    h.mkdir()
    (h / "datasets").symlink_to(built_home / "datasets")
    exp = tmp_path / "pgsvc.toml"
    exp.write_text(EXPERIMENT)
    yield h
    postgres.remove(h)


def _env(home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_PG_DSN"}
    env.update({"WORKBENCH_HOME": str(home), "PYTHONPATH": str(REPO), **extra})
    return env


def _search(home: Path, *extra: str, env: dict | None = None, config: str = "fts"):
    exp = home.parent / "pgsvc.toml"
    return run(["search", "-e", str(exp), "-c", config, "-d", "gita", *extra, "karma yoga"], env=env or _env(home))


def test_stale_postmaster_pid_of_an_unrelated_process_is_ignored_never_signalled(home):
    first = _search(home)
    assert first.returncode == 0, first.stderr
    lay = postgres.layout(home)
    assert (lay.pgdata / "PG_VERSION").is_file() and postgres.status(home)["state"] == "stopped"  # stopped at exit
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        (lay.pgdata / "postmaster.pid").write_text(
            f"{sleeper.pid}\n{lay.pgdata}\n{int(time.time())}\n5432\n{lay.pgdata}\n\n  1234  5678\nready   \n")
        proc = _search(home)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"stale {lay.pgdata / 'postmaster.pid'} (pid {sleeper.pid}" in proc.stderr
        assert "1." in proc.stdout and "BG " in proc.stdout  # the query was answered
        time.sleep(0.2)
        assert sleeper.poll() is None  # the unrelated process lives: it was never signalled
        assert postgres.status(home)["state"] == "stopped"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sigterm_to_a_command_stops_the_server_it_started(home):
    # the command SIGTERMs itself while fusing, i.e. after its lanes used the server
    proc = _search(home, env=kill_at("workbench.eval.fusion:fuse", 1, sig="SIGTERM", env=_env(home)), config="both")
    assert proc.returncode == 143, proc.stderr
    assert "Traceback" not in proc.stderr
    assert postgres.status(home)["state"] == "stopped"
    lay = postgres.layout(home)
    assert not (lay.pgdata / "postmaster.pid").exists()


_HOLDER = """
import sys
from pathlib import Path
from workbench.engines import pg_client as pg
print(pg.server_dsn(Path(sys.argv[1])), flush=True)
sys.stdin.read()  # until the test closes stdin: then exit normally (atexit releases the server)
"""


def _hold(home: Path, user: str | None = None) -> tuple[subprocess.Popen, str]:
    py, extra = user_python() if user else ([sys.executable], {})
    cmd = [*py, "-c", _HOLDER, str(home)]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**_env(home), **extra}, cwd="/")
    line = proc.stdout.readline().strip()
    if not line.startswith("postgresql://"):
        proc.kill()
        raise AssertionError(proc.stderr.read())
    return proc, line


def _release(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(60)


_COPY_SCENARIO = """
import json, subprocess, sys
from pathlib import Path
from workbench.engines import pg_client as pg
from workbench.services import postgres
a, b = Path(sys.argv[1]), Path(sys.argv[2])
holder = subprocess.Popen([sys.executable, "-c", sys.argv[3], str(a)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
dsn_a = holder.stdout.readline().strip()
pid_a = postgres.status(a)["pid"]
subprocess.run(["cp", "-a", str(a), str(b)], check=True)   # copied while its server runs
dsn_b = pg.server_dsn(b)
with pg.connect(dsn_b) as conn:
    datadir_b = conn.execute("SHOW data_directory").fetchone()[0]
    conn.execute("CREATE TABLE only_in_b (x int)")
with pg.connect(dsn_a) as conn:
    in_a = conn.execute("SELECT to_regclass('only_in_b')").fetchone()[0]
out = {"dsn_a": dsn_a, "dsn_b": dsn_b, "datadir_b": datadir_b, "pgdata_b": str(postgres.layout(b).pgdata),
       "pid_a": pid_a, "pid_b": postgres.status(b)["pid"], "a_still": postgres.status(a)["pid"],
       "table_in_a": in_a}
holder.stdin.close(); holder.wait(60)
pg.stop_embedded(b)
out["after"] = [postgres.status(a)["state"], postgres.status(b)["state"]]
postgres.remove(a); postgres.remove(b)
print(json.dumps(out))
"""


def _copy_scenario(base: Path, user: str | None) -> dict:
    a, b = base / "a", base / "b"
    a.mkdir()
    if user:
        os.chown(base, *_ids(user))
        os.chown(a, *_ids(user))
        proc = as_user(user, _COPY_SCENARIO, timeout=300, args=[str(a), str(b), _HOLDER], env=_env(a))
    else:
        proc = subprocess.run([sys.executable, "-c", _COPY_SCENARIO, str(a), str(b), _HOLDER], capture_output=True,
                              text=True, timeout=300, cwd="/", env=_env(a))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ids(user: str) -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


def _check_copy(out: dict) -> None:
    assert out["dsn_b"] != out["dsn_a"]
    assert Path(out["datadir_b"]) == Path(out["pgdata_b"])  # the copy's own data directory
    assert out["pid_b"] != out["pid_a"] and out["a_still"] == out["pid_a"]  # the original's server untouched
    assert out["table_in_a"] is None  # what was created in the copy did not land in the original's database
    assert out["after"] == ["stopped", "stopped"]


def test_a_home_copied_while_its_server_runs_gets_its_own_server_as_a_normal_user():
    user = other_user()
    base = Path(tempfile.mkdtemp(prefix="wb-test-copy-"))
    try:
        out = _copy_scenario(base, user)
        assert out["pgdata_b"] == str(base / "b" / "pg")  # a normal user keeps the data in the home
        _check_copy(out)
    finally:
        subprocess.run(["rm", "-rf", str(base)])


def test_a_home_copied_while_its_server_runs_gets_its_own_server_as_root():
    if not is_root():
        pytest.skip("the root layout needs root")
    base = Path(tempfile.mkdtemp(prefix="wb-test-copy-"))
    try:
        out = _copy_scenario(base, None)
        assert out["pgdata_b"].startswith(str(postgres.SYSTEM_ROOT))
        _check_copy(out)
    finally:
        subprocess.run(["rm", "-rf", str(base)])


_SLOW_BUILD = """
import sys, time
sys.path.insert(0, sys.argv[3])
from pathlib import Path
from workbench.testing import WordHashEmbedder
from workbench.data import catalog
from workbench.engines.pg_index import index_dataset

class Slow(WordHashEmbedder):
    def embed_passages(self, texts):
        time.sleep(1.0)
        return super().embed_passages(texts)

ds = catalog.load("gita", catalog.load_definitions(), None, Path(sys.argv[2]))
print("building", flush=True)
info = index_dataset(sys.argv[1], ds, Slow(24))
print("built", info.reused, flush=True)
"""


def test_a_second_process_waits_for_an_index_build_says_for_whom_and_reuses_it(pg_dsn, built_home):
    from workbench.data import catalog
    from workbench.engines.pg_index import index_dataset
    from workbench.testing import WordHashEmbedder

    builder = subprocess.Popen([sys.executable, "-c", _SLOW_BUILD, pg_dsn, str(built_home), str(REPO / "tests")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert builder.stdout.readline().strip() == "building"
        time.sleep(1.0)  # it is inside its build transaction now
        said: list[str] = []
        ds = catalog.load("gita", catalog.load_definitions(), None, built_home)
        with pg.connect(pg_dsn) as conn:
            t0 = time.perf_counter()
            with conn.transaction():
                pg.ddl_lock(conn, log=said.append)
            waited = time.perf_counter() - t0
            pg.ensure_reader(conn)  # the grants that failed with "tuple concurrently updated"
        info = index_dataset(pg_dsn, ds, WordHashEmbedder(24))
        out, err = builder.communicate(timeout=120)
    finally:
        if builder.poll() is None:
            builder.kill()
    assert builder.returncode == 0, err
    assert out.strip() == "built False"  # the slow process built it
    assert info.reused is True  # the waiting one found it built
    assert waited > 0.5
    assert len(said) == 1 and said[0].startswith("waiting for server process ") and "workbench[" in said[0] \
        and "building an index" in said[0]


def test_another_local_user_cannot_reach_or_use_roots_server(tmp_path):
    user = other_user()
    home = tmp_path / ("long-" + "x" * 100) / "home"  # a path too long for a socket in the home
    home.mkdir(parents=True)
    try:
        dsn = pg.server_dsn(home)
        lay = postgres.layout(home)
        info = postgres.read_pidfile(lay.pgdata)
        sock = info.socket_dir
        st = os.lstat(sock)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == _ids(postgres.SERVER_USER)[0]
        assert not str(sock).startswith("/tmp/runtime")
        with pg.connect(dsn) as conn:
            rules = conn.execute("SELECT type, auth_method, options FROM pg_hba_file_rules").fetchall()
            listen = conn.execute("SHOW listen_addresses").fetchone()[0]
        assert rules == [("local", "peer", [f"map={postgres.IDENT_MAP}"])] and listen == ""
        code = f"import psycopg\npsycopg.connect({dsn!r}, connect_timeout=5)\nprint('CONNECTED')"
        got = as_user(user, code)
        assert got.returncode != 0 and "CONNECTED" not in got.stdout
        assert "Permission denied" in got.stderr or "authentication failed" in got.stderr
    finally:
        postgres.remove(home)


def test_a_normal_users_server_refuses_every_other_os_user_even_root():
    user = other_user()
    base = Path(tempfile.mkdtemp(prefix="wb-test-peer-"))
    home = base / ("long-" + "y" * 100) / "home"
    home.mkdir(parents=True)
    for p in (base, home.parent, home):
        os.chown(p, *_ids(user))
    try:
        holder, dsn = _hold(home, user)
        try:
            sock = Path(dsn.split("host=")[1].split("&")[0])
            st = os.lstat(sock)
            assert sock.name.startswith("wb-pg-") and stat.S_IMODE(st.st_mode) == 0o700 \
                and st.st_uid == _ids(user)[0]  # a private mkdtemp folder, not a shared runtime folder
            with pytest.raises(psycopg.OperationalError, match="Peer authentication failed"):
                psycopg.connect(dsn, connect_timeout=5)  # root reaches the socket, but is not the home's owner
        finally:
            _release(holder)
        assert not sock.exists()  # the private socket folder goes with the server
    finally:
        as_user(user, f"from workbench.services import postgres; postgres.remove({str(home)!r})")
        subprocess.run(["rm", "-rf", str(base)])


def test_starting_as_root_changes_no_permission_outside_the_workbench_folders(tmp_path):
    if not is_root():
        pytest.skip("the permission change happened only as root")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    home = private / "work" / "home"
    home.mkdir(parents=True)
    before = {p: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path, private, private / "work", home)}
    try:
        pg.server_dsn(home)
        after = {p: stat.S_IMODE(p.stat().st_mode) for p in before}
        assert after == before and after[private] == 0o700
        assert stat.S_IMODE(postgres.SYSTEM_ROOT.stat().st_mode) == 0o711
        pgdata = postgres.layout(home).pgdata
        assert stat.S_IMODE(pgdata.stat().st_mode) == 0o700 and pgdata.stat().st_uid == _ids(postgres.SERVER_USER)[0]
    finally:
        postgres.remove(home)


def test_a_server_running_with_trust_authentication_is_restarted_safe(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    try:
        pg.server_dsn(home)
        pg.stop_embedded(home)
        lay = postgres.layout(home)
        (lay.pgdata / "pg_hba.conf").write_text("local all all trust\n")  # as an older workbench wrote it
        ids = postgres._server_ids()
        proc = postgres._run([str(postgres.binaries() / "pg_ctl"), "-D", str(lay.pgdata), "-l", str(lay.log), "-w",
                              "-o", f"-c listen_addresses='' -k {lay.pgdata}", "start"], ids, 60)
        assert proc.returncode == 0, proc.stderr
        old_pid = postgres.status(home)["pid"]
        said: list[str] = []
        dsn = postgres.attach(home, log=said.append)
        assert any("restarting the embedded PostgreSQL" in m and "pg_hba.conf" in m for m in said), said
        assert postgres.status(home)["pid"] != old_pid
        assert (lay.pgdata / "pg_hba.conf").read_text() == postgres.HBA
        with pg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM pg_hba_file_rules WHERE auth_method = 'trust'").fetchone()[0] == 0
    finally:
        postgres.remove(home)
