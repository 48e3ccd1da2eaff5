"""A local single-node OpenSearch for development, tests and CI.

``workbench services up opensearch`` (:func:`up`) fetches, installs, configures and
starts it; ``workbench services down opensearch`` (:func:`down`) stops it. Any other
cluster is used instead by setting ``WORKBENCH_OS_URL`` (see :mod:`workbench.osearch`).

**What is installed** (:data:`ARTIFACTS`, fetched by Maven, so the Maven local
repository ``~/.m2`` is the download cache kept between runs):

* the distribution ``org.opensearch.distribution.integ-test-zip:opensearch:2.19.1``
  (zip; the minimal build, no bundled JDK and only the ``transport-netty4`` module);
* the modules it lacks, assembled from their jars: ``lang-painless`` (k-NN extends it)
  and ``analysis-common`` (``lowercase``, ``asciifolding``, ``synonym_graph``…);
* the k-NN plugin ``org.opensearch.plugin:opensearch-knn:2.19.1.0`` (zip). It carries no
  native libraries, so vectors use the ``lucene`` engine. k-NN pins the server to 2.19.1;
* ICU analysis: the official ``analysis-icu`` plugin zip is not published to Maven
  Central, so the workbench compiles a 60-line plugin (``icu_plugin/``) that registers
  Lucene's own ICU analysis (``lucene-analysis-icu`` 9.12.1 = the server's Lucene,
  ICU4J 74.2) under the official names ``icu_tokenizer``, ``icu_folding`` and
  ``icu_normalizer``. ``javac`` (JDK 11+) is needed once, at install.

The install goes to ``<runtime>/opensearch-2.19.1-<recipe hash>/`` and is reused while
the recipe is unchanged. OpenSearch refuses to run as root: when the workbench runs as
root it runs the node as the system user :data:`SERVICE_USER` (created with
``useradd`` if missing), and because a home under ``/root`` is not traversable by
other users, the runtime folder is then ``/var/tmp/workbench-opensearch/<hash of the
home>`` instead of ``<home>/services/opensearch``. The node state (URL, pid, folders)
is in ``<home>/services/opensearch.json``.

**Node settings:** bound to 127.0.0.1 on a free HTTP port (or ``port``),
``discovery.type: single-node``, heap ``WORKBENCH_OS_HEAP`` (default 512m), no
security plugin (plain HTTP, local only), disk-watermark checks off (a nearly full
disk would otherwise make indexes read-only). :func:`up` waits until the cluster is
at least yellow.

Java: ``OPENSEARCH_JAVA_HOME``, else ``JAVA_HOME``, else the ``java`` on ``PATH``
(OpenSearch 2.19 runs on Java 11–23; Java 17 is the tested one).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from workbench.errors import WorkbenchError

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"
LUCENE_VERSION = "9.12.1"
ICU4J_VERSION = "74.2"

#: (groupId, artifactId, version, type): everything fetched from Maven.
ARTIFACTS: tuple[tuple[str, str, str, str], ...] = (
    ("org.opensearch.distribution.integ-test-zip", "opensearch", OPENSEARCH_VERSION, "zip"),
    ("org.opensearch.plugin", "opensearch-knn", KNN_VERSION, "zip"),
    ("org.opensearch.plugin", "lang-painless", OPENSEARCH_VERSION, "jar"),
    ("org.opensearch.plugin", "opensearch-scripting-painless-spi", OPENSEARCH_VERSION, "jar"),
    ("org.antlr", "antlr4-runtime", "4.13.1", "jar"),
    ("org.ow2.asm", "asm", "9.7", "jar"),
    ("org.ow2.asm", "asm-util", "9.7", "jar"),
    ("org.ow2.asm", "asm-tree", "9.7", "jar"),
    ("org.ow2.asm", "asm-commons", "9.7", "jar"),
    ("org.ow2.asm", "asm-analysis", "9.7", "jar"),
    ("org.opensearch.plugin", "analysis-common", OPENSEARCH_VERSION, "jar"),
    ("org.apache.lucene", "lucene-analysis-icu", LUCENE_VERSION, "jar"),
    ("com.ibm.icu", "icu4j", ICU4J_VERSION, "jar"),
)

#: module folder → (classname, extended plugins, jar artifactIds, security policy).
MODULES = {
    "lang-painless": ("org.opensearch.painless.PainlessPlugin", "",
                      ("lang-painless", "opensearch-scripting-painless-spi", "antlr4-runtime", "asm", "asm-util",
                       "asm-tree", "asm-commons", "asm-analysis"),
                      'grant {\n  permission java.lang.RuntimePermission "createClassLoader";\n'
                      '  permission java.lang.RuntimePermission "getClassLoader";\n};\n'),
    "analysis-common": ("org.opensearch.analysis.common.CommonAnalysisPlugin", "lang-painless",
                        ("analysis-common",), ""),
}

ICU_PLUGIN = "workbench-analysis-icu"
ICU_SOURCE = Path(__file__).with_name("icu_plugin") / "WorkbenchIcuPlugin.java"
SERVICE_USER = "workbench_os"
HEAP_ENV = "WORKBENCH_OS_HEAP"
DEFAULT_HEAP = "512m"
CLUSTER_NAME = "workbench"


class ServiceError(WorkbenchError):
    """The local OpenSearch cannot be fetched, installed, started or stopped (names the step, the log and the fix)."""


@dataclass
class NodeState:
    """A started node: ``url`` (``http://127.0.0.1:PORT``), ``pid``, its install and data folders, its log."""

    url: str
    pid: int
    install: str
    data: str
    log: str
    heap: str
    started_at: float


# ---------------------------------------------------------------- folders

def state_path(home: Path) -> Path:
    """``<home>/services/opensearch.json``: the running node's :class:`NodeState`."""
    return Path(home) / "services" / "opensearch.json"


def runtime_dir(home: Path) -> Path:
    """Where the install, data and logs live (see the module docstring for the root case)."""
    home = Path(home).resolve()
    if os.geteuid() == 0:
        return Path("/var/tmp/workbench-opensearch") / hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return home / "services" / "opensearch"


def recipe_hash() -> str:
    """sha256 (12 hex) of what an install is made of: the artifacts, modules and the ICU plugin source."""
    h = hashlib.sha256(json.dumps([ARTIFACTS, MODULES], sort_keys=True).encode())
    h.update(ICU_SOURCE.read_bytes())
    return h.hexdigest()[:12]


# ---------------------------------------------------------------- fetch

def fetch(dest: Path, *, log: Callable[[str], None] = print) -> dict[str, Path]:
    """Copy every artifact of :data:`ARTIFACTS` into ``dest`` with Maven; return artifactId → file.

    Maven resolves from its local repository first, so only the first call downloads.

    Raises:
        ServiceError: ``mvn`` is missing or an artifact cannot be resolved (with Maven's message).
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceError("Maven (`mvn`) is not on PATH; it fetches OpenSearch and its plugins: install Maven "
                           "(e.g. apt install maven), or point WORKBENCH_OS_URL at a running cluster")
    dest.mkdir(parents=True, exist_ok=True)
    deps = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
                   f"<type>{t}</type></dependency>" for g, a, v, t in ARTIFACTS)
    pom = dest / "pom.xml"
    pom.write_text('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
                   "<groupId>workbench</groupId><artifactId>opensearch-node</artifactId><version>1</version>"
                   f"<packaging>pom</packaging><dependencies>{deps}</dependencies></project>\n")
    log(f"fetching OpenSearch {OPENSEARCH_VERSION}, k-NN {KNN_VERSION} and modules with Maven (cached in ~/.m2)")
    cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", "-DexcludeTransitive=true",
           f"-DoutputDirectory={dest / 'artifacts'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise ServiceError(f"Maven could not fetch the OpenSearch artifacts (command: {' '.join(cmd)}):\n{tail}\n"
                           "check network access to Maven Central (or a mirror in ~/.m2/settings.xml)")
    out: dict[str, Path] = {}
    for _g, a, v, t in ARTIFACTS:
        f = dest / "artifacts" / f"{a}-{v}.{t}"
        if not f.is_file():
            raise ServiceError(f"Maven reported success but {f} is missing; remove {dest} and retry")
        out[a] = f
    return out


# ---------------------------------------------------------------- install

def _java_home() -> str:
    for env in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        if os.environ.get(env):
            return os.environ[env]
    java = shutil.which("java")
    if java is None:
        raise ServiceError("no Java found for OpenSearch: install a JDK 17 (e.g. apt install openjdk-17-jdk-headless) "
                           "or set JAVA_HOME")
    return str(Path(java).resolve().parent.parent)


def install(runtime: Path, *, log: Callable[[str], None] = print) -> Path:
    """The install folder for the current recipe, built when missing; returns it.

    Raises:
        ServiceError: fetching fails, or ``javac`` cannot compile the ICU plugin.
    """
    target = runtime / f"opensearch-{OPENSEARCH_VERSION}-{recipe_hash()}"
    if (target / ".workbench-installed").is_file():
        return target
    files = fetch(runtime / "fetch", log=log)
    tmp = runtime / f".installing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"installing into {target}")
    with zipfile.ZipFile(files["opensearch"]) as z:
        z.extractall(tmp)
    root = tmp / f"opensearch-{OPENSEARCH_VERSION}"
    for p in (root / "bin").iterdir():
        p.chmod(0o755)
    for name, (classname, extended, jars, policy) in MODULES.items():
        mdir = root / "modules" / name
        mdir.mkdir(parents=True)
        for a in jars:
            shutil.copy2(files[a], mdir / files[a].name)
        _descriptor(mdir, name, classname, extended)
        if policy:
            (mdir / "plugin-security.policy").write_text(policy)
    knn = root / "plugins" / "opensearch-knn"
    knn.mkdir(parents=True)
    with zipfile.ZipFile(files["opensearch-knn"]) as z:
        z.extractall(knn)
    _build_icu_plugin(root, files, tmp / "icu-build")
    shutil.rmtree(tmp / "icu-build", ignore_errors=True)
    (root / ".workbench-installed").write_text(recipe_hash() + "\n")
    if target.exists():
        shutil.rmtree(target)
    root.rename(target)
    for old in runtime.glob("opensearch-*"):  # installs of earlier recipes
        if old != target and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return target


def _descriptor(folder: Path, name: str, classname: str, extended: str) -> None:
    (folder / "plugin-descriptor.properties").write_text(
        f"description={name} (assembled by the workbench from its Maven jars)\nversion={OPENSEARCH_VERSION}\n"
        f"name={name}\nclassname={classname}\njava.version=11\nopensearch.version={OPENSEARCH_VERSION}\n"
        f"extended.plugins={extended}\nhas.native.controller=false\n")


def _build_icu_plugin(root: Path, files: dict[str, Path], build: Path) -> None:
    javac = shutil.which("javac", path=str(Path(_java_home()) / "bin")) or shutil.which("javac")
    if javac is None:
        raise ServiceError("`javac` not found: the ICU analysis plugin is compiled at install; install a JDK "
                           "(not only a JRE), e.g. apt install openjdk-17-jdk-headless, or set JAVA_HOME to one")
    classes = build / "classes"
    classes.mkdir(parents=True)
    cp = os.pathsep.join([str(root / "lib" / "*"), str(files["lucene-analysis-icu"]), str(files["icu4j"])])
    proc = subprocess.run([javac, "--release", "11", "-nowarn", "-d", str(classes), "-cp", cp, str(ICU_SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ServiceError(f"javac could not compile {ICU_SOURCE}:\n{proc.stderr.strip()[-2000:]}")
    pdir = root / "plugins" / ICU_PLUGIN
    pdir.mkdir(parents=True)
    with zipfile.ZipFile(pdir / f"{ICU_PLUGIN}-{OPENSEARCH_VERSION}.jar", "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n\n")
        for f in sorted(classes.rglob("*.class")):
            jar.write(f, f.relative_to(classes).as_posix())
    for a in ("lucene-analysis-icu", "icu4j"):
        shutil.copy2(files[a], pdir / files[a].name)
    _descriptor(pdir, ICU_PLUGIN, "org.workbench.analysis.icu.WorkbenchIcuPlugin", "")


# ---------------------------------------------------------------- run

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _service_ids() -> tuple[int, int] | None:
    """(uid, gid) to run the node as: ``None`` when not root, else :data:`SERVICE_USER` (created if missing)."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pw = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise ServiceError(f"OpenSearch cannot run as root and `useradd` is missing to create the user "
                               f"{SERVICE_USER}; run the workbench as a normal user") from None
        proc = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
                              capture_output=True, text=True)
        if proc.returncode != 0 and "already exists" not in proc.stderr:
            raise ServiceError(f"cannot create the system user {SERVICE_USER} to run OpenSearch "
                               f"(OpenSearch refuses root): {proc.stderr.strip()}") from None
        pw = pwd.getpwnam(SERVICE_USER)
    return pw.pw_uid, pw.pw_gid


def _chown_tree(path: Path, ids: tuple[int, int]) -> None:
    for p in [path, *path.rglob("*")]:
        try:
            os.chown(p, *ids, follow_symlinks=False)
        except FileNotFoundError:
            pass


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` (> 0) exists."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_node(pid: int, install: str) -> bool:
    """Whether ``pid`` is an OpenSearch JVM started from ``install`` (never signal a stranger
    that inherited a stale pid)."""
    if not _pid_alive(pid):
        return False
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    text = b" ".join(cmd).decode(errors="replace")
    return "org.opensearch.bootstrap.OpenSearch" in text and (not install or install in text)


def _get(url: str, path: str, timeout: float = 2.0) -> dict | None:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=timeout) as resp:
            out = json.loads(resp.read())
            return out if isinstance(out, dict) else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _health(url: str, pid: int | None = None, timeout: float = 2.0) -> str | None:
    """The cluster status (green/yellow/red) at ``url``, or None when nothing answers — or,
    with ``pid``, when the node answering there is not that process (another node on the port)."""
    health = _get(url, "/_cluster/health", timeout)
    if health is None:
        return None
    if pid is not None:
        nodes = (_get(url, "/_nodes/_local/process", timeout) or {}).get("nodes", {})
        if not any(n.get("process", {}).get("id") == pid for n in nodes.values()):
            return None
    return health.get("status")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _read_state(home: Path, log: Callable[[str], None] = lambda _m: None) -> dict | None:
    """The saved :class:`NodeState` as a dict, or ``None`` when there is none or it is unreadable.

    A corrupt file is moved aside to ``opensearch.json.corrupt`` (never trusted: its pid
    could be anyone's), and ``log`` says so and what to check.
    """
    path = state_path(home)
    if not path.is_file():
        return None
    try:
        st = json.loads(path.read_text())
        if not isinstance(st, dict) or set(NodeState.__dataclass_fields__) - set(st) or \
                not isinstance(st["pid"], int) or not isinstance(st["url"], str) or not isinstance(st["install"], str):
            raise ValueError("missing or mistyped fields")
        return st
    except (ValueError, OSError, UnicodeDecodeError):
        aside = path.with_name(path.name + ".corrupt")
        path.replace(aside)
        log(f"the node state file {path} was unreadable and is moved to {aside}; if a node of this home still "
            f"runs, find it with `ps aux | grep org.opensearch.bootstrap` and stop it by hand")
        return None


def status(home: Path, log: Callable[[str], None] = lambda _m: None) -> dict:
    """``{"state": "running"|"starting"|"dead"|"stopped", ...NodeState fields, "health": ...}`` for the node of ``home``.

    ``dead``: the recorded process is gone (or is no longer an OpenSearch of this home's
    install); ``starting``: it lives but does not answer at its URL yet.
    """
    st = _read_state(home, log)
    if st is None:
        return {"state": "stopped"}
    alive = _is_node(st["pid"], st["install"])
    health = _health(st["url"], st["pid"]) if alive else None
    state = "running" if (health and alive) else ("dead" if not alive else "starting")
    return {"state": state, "health": health, **st}


def _check_heap(heap: str) -> str:
    h = heap.strip().lower()
    if not (h[:-1].isdigit() and h[-1:] in ("m", "g")):
        raise ServiceError(f"heap {heap!r} (from {HEAP_ENV} or --heap) must look like 512m or 1g")
    mb = int(h[:-1]) * (1024 if h.endswith("g") else 1)
    try:
        total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        total_mb = None
    if mb < 256:
        raise ServiceError(f"heap {heap!r} is too small for OpenSearch with k-NN; give at least 256m (512m is the default)")
    if total_mb and mb > total_mb // 2:
        raise ServiceError(f"heap {heap!r} is more than half of this machine's {total_mb:,} MiB of memory; "
                           "OpenSearch needs the rest for the file cache: give at most half")
    return h


def up(home: Path, *, port: int | None = None, heap: str | None = None, timeout: float = 240.0,
       log: Callable[[str], None] = print) -> NodeState:
    """Start the local node of ``home`` (installing it first when needed) and wait until it is yellow or green.

    A node already running for ``home`` is reused (``port``/``heap`` are then ignored, and ``log`` says so).

    Args:
        home: the workbench home.
        port: HTTP port on 127.0.0.1 (default: a free one); it must be free.
        heap: JVM heap, e.g. ``512m``, ``1g`` (default ``WORKBENCH_OS_HEAP`` or 512m; 256m up to half the memory).
        timeout: seconds to wait for the cluster.

    Raises:
        ServiceError: a bad heap, a port in use, install or start failed, or the cluster was not
            healthy in time (the message quotes the end of the node's log).
    """
    home = Path(home)
    current = status(home, log)
    if current["state"] in ("running", "starting"):
        state = NodeState(**{k: current[k] for k in NodeState.__dataclass_fields__})
        if (port and not state.url.endswith(f":{port}")) or (heap and heap.strip().lower() != state.heap):
            log(f"OpenSearch already runs at {state.url} (heap {state.heap}); --port/--heap are ignored: "
                "`workbench services down opensearch` first to change them")
        return state if current["state"] == "running" else _wait(state, timeout)
    heap = _check_heap(heap or os.environ.get(HEAP_ENV, "").strip() or DEFAULT_HEAP)
    if port is not None and not _port_free(port):
        raise ServiceError(f"port {port} on 127.0.0.1 is in use; choose another --port or omit it (a free one is picked)")
    runtime = runtime_dir(home)
    runtime.mkdir(parents=True, exist_ok=True)
    target = install(runtime, log=log)
    data, logs = runtime / "data", runtime / "logs"
    data.mkdir(exist_ok=True)
    logs.mkdir(exist_ok=True)
    http_port = port or _free_port()
    (target / "config" / "opensearch.yml").write_text(
        f"cluster.name: {CLUSTER_NAME}\nnode.name: workbench-1\nnetwork.host: 127.0.0.1\n"
        f"http.port: {http_port}\ntransport.port: {_free_port()}\ndiscovery.type: single-node\n"
        f"path.data: {data}\npath.logs: {logs}\ncluster.routing.allocation.disk.threshold_enabled: false\n"
        "action.destructive_requires_name: true\n")
    ids = _service_ids()
    if ids is not None:
        _chown_tree(runtime, ids)
    pidfile = runtime / "opensearch.pid"
    pidfile.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "JAVA_TOOL"))}
    env.update({"OPENSEARCH_JAVA_HOME": _java_home(), "OPENSEARCH_JAVA_OPTS": f"-Xms{heap} -Xmx{heap}",
                "OPENSEARCH_PATH_CONF": str(target / "config")})
    log(f"starting OpenSearch on http://127.0.0.1:{http_port} (heap {heap}, logs in {logs})")
    logfile = logs / f"{CLUSTER_NAME}.log"
    console = runtime / "console.log"  # the launcher's own output (bootstrap errors land here)
    deadline = time.monotonic() + timeout
    with open(console, "wb") as out:  # a file, not a pipe: the daemon inherits it and outlives this call
        try:
            proc = subprocess.run([str(target / "bin" / "opensearch"), "-d", "-p", str(pidfile)], env=env,
                                  cwd=str(target), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  user=ids[0] if ids else None, group=ids[1] if ids else None, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServiceError(f"the OpenSearch launcher did not return within {timeout:.0f} s; see {console} "
                               f"and {logfile}") from None
    if proc.returncode != 0:
        text = console.read_text(errors="replace").strip()
        raise ServiceError(f"OpenSearch did not start (exit {proc.returncode}):\n{text[-1500:]}\n"
                           f"see {console} and {logfile}")
    pid = -1
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.is_file() else ""
        if text.isdigit():
            pid = int(text)
            break
        time.sleep(0.2)
    if pid <= 0:
        raise ServiceError(f"OpenSearch wrote no pid file ({pidfile}) within {timeout:.0f} s; see {console} and "
                           f"{logfile}")
    state = NodeState(f"http://127.0.0.1:{http_port}", pid, str(target), str(data), str(logfile), heap, time.time())
    state_path(home).parent.mkdir(parents=True, exist_ok=True)
    state_path(home).write_text(json.dumps(asdict(state), indent=2) + "\n")
    return _wait(state, max(deadline - time.monotonic(), 1.0))


#: Log lines that name why a node failed, searched for before quoting the log's tail.
_CAUSES = ("BindException", "Address already in use", "Permission denied", "OutOfMemoryError",
           "Could not reserve enough space", "Invalid maximum heap size", "java.lang.IllegalStateException",
           "java.lang.IllegalArgumentException")


def _wait(state: NodeState, timeout: float) -> NodeState:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _health(state.url, state.pid) in ("green", "yellow"):
            return state
        if not _pid_alive(state.pid):
            break
        time.sleep(0.5)
    lines: list[str] = []
    try:
        lines = Path(state.log).read_text(errors="replace").splitlines()
    except OSError:
        pass
    cause = next((ln.strip() for ln in reversed(lines) if any(c in ln for c in _CAUSES)), "")
    tail = "\n".join(ln for ln in lines[-8:] if not ln.lstrip().startswith("at "))
    died = not _pid_alive(state.pid)
    what = "exited" if died else f"was not healthy after {timeout:.0f} s"
    hint = ""
    if "Address already in use" in cause or "BindException" in cause:
        hint = "; its port is taken: choose another --port or omit it"
    raise ServiceError(f"OpenSearch at {state.url} {what}{hint}" + (f"; cause: {cause[:300]}" if cause else "") +
                       f"; see its log {state.log}" + (f":\n{tail}" if tail and not cause else ""))


def down(home: Path, *, timeout: float = 60.0, log: Callable[[str], None] = lambda _m: None) -> bool:
    """Stop the node of ``home``; return whether one was running.

    Only a process that is an OpenSearch JVM of this home's install is signalled (a stale
    pid that now belongs to another process is left alone).

    Raises:
        ServiceError: the node did not stop within ``timeout`` seconds, even after SIGKILL.
    """
    path = state_path(home)
    st = _read_state(home, log)
    if st is None:
        return False
    pid = st["pid"]
    was = _is_node(pid, st["install"])
    if not was and _pid_alive(pid):
        log(f"pid {pid} of {path} is no longer an OpenSearch of this home; it is left alone")
    if was:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            time.sleep(1)
            if _pid_alive(pid):
                raise ServiceError(f"OpenSearch (pid {pid}) did not stop; kill it by hand")
    path.unlink(missing_ok=True)
    return was
