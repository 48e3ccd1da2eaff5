"""A local single-node OpenSearch for development, tests and CI, reachable only with this home's secrets.

``workbench services up opensearch`` (:func:`up`) fetches, installs, configures and
starts it; ``workbench services down opensearch`` (:func:`down`) stops it. Any other
cluster is used instead by setting ``WORKBENCH_OS_URL`` (see :mod:`workbench.engines.os_client`).

**What is installed** (:data:`ARTIFACTS`, fetched by Maven, so the Maven local
repository ``~/.m2`` is the download cache kept between runs):

* the distribution ``org.opensearch.distribution.integ-test-zip:opensearch:2.19.1``
  (zip; the minimal build, no bundled JDK and only the ``transport-netty4`` module);
* the modules it lacks, assembled from their jars: ``lang-painless`` (k-NN extends it)
  and ``analysis-common`` (``lowercase``, ``asciifolding``, ``synonym_graph``…);
* the k-NN plugin ``org.opensearch.plugin:opensearch-knn:2.19.1.0`` (zip). It carries no
  native libraries, so vectors use the ``lucene`` engine. k-NN pins the server to 2.19.1;
* the security plugin ``org.opensearch.plugin:opensearch-security:2.19.1.0`` (zip);
* the neural-search plugin ``org.opensearch.plugin:neural-search:2.19.1.0`` (zip; Maven's artifactId is
  ``neural-search``, the plugin's own name ``opensearch-neural-search``; it extends ``opensearch-knn``). It
  brings the ``hybrid`` query and the search-pipeline processors ``normalization-processor`` and
  ``score-ranker-processor`` (RRF), which run a fused config engine-natively
  (:mod:`workbench.export.opensearch`). ml-commons (``opensearch-ml-plugin``, 360 MB) is **not** installed:
  the node starts without it (neural-search bundles the ml-commons *client* jar only), and the hybrid query
  and those processors do not call it; neural-search's model-backed features (the ``neural`` query, the
  embedding ingest processors, ``ml_opensearch`` rerank) need it and are not available;
* ICU analysis: the official ``analysis-icu`` plugin zip is not published to Maven
  Central, so the workbench compiles a 60-line plugin (``icu_plugin/``) that registers
  Lucene's own ICU analysis (``lucene-analysis-icu`` 9.12.1 = the server's Lucene,
  ICU4J 74.2) under the official names ``icu_tokenizer``, ``icu_folding`` and
  ``icu_normalizer``. ``javac`` (JDK 11+) is needed once, at install.

The install goes to ``<runtime>/opensearch-2.19.1-<recipe hash>/`` and is reused while
the recipe is unchanged. OpenSearch refuses to run as root: when the workbench runs as
root it runs the node as the system user :data:`SERVICE_USER` (created with
``useradd`` if missing, without root's groups), and because a home under ``/root`` is
not traversable by other users, the runtime folder is then
``/var/lib/workbench-opensearch/<hash of the home>`` (the base folder root-owned, mode
0711) instead of ``<home>/services/opensearch``. The runtime folder is mode 0700 (owned
by the node's user), so no other local user can list or read the install, the
configuration, the data or the logs. The node state (URL, pid, folders) is in
``<home>/services/opensearch.json`` (0600).

**Who can reach it** (the security plugin; nothing of its demo configuration is used):

* HTTP is **HTTPS** on 127.0.0.1 with **HTTP basic authentication** required for every
  request (``401`` without it). The only user is :data:`USER` (role ``all_access``),
  its bcrypt hash is in the node's ``internal_users.yml``, its random password in
  ``<home>/services/opensearch-credentials.json`` (0600, the home's owner only). HTTPS
  rather than plain HTTP with a password: the client checks the node's certificate
  against this home's private CA before it sends the password, so a process of another
  user that took the port while the node was down cannot collect it.
* The transport port (node to node) is TLS with client certificates required: only a
  peer with a certificate of this home's CA whose DN is in ``plugins.security.nodes_dn``
  can talk to it (a plain connection is dropped).
* :func:`ensure_secrets` makes, once per runtime folder, a private CA (its key is not
  kept), a node certificate (``CN=workbench-node``, for 127.0.0.1 and localhost), an
  admin certificate (``CN=workbench-admin``, ``plugins.security.authcz.admin_dn``) and the
  password, in ``<runtime>/secrets/`` (0700, files 0600, owned by the workbench's user,
  not the node's). The node gets copies of the CA, its certificate and its key in its
  config folder (0600, owned by the node's user). The CA certificate (public) is copied
  to ``<home>/services/opensearch-ca.pem`` for the client.
* The security index is initialised from these files at the node's first start
  (``plugins.security.allow_default_init_securityindex``); when it holds another
  password (the secrets were removed, but not the data), :func:`up` resets the user's
  hash with the admin certificate.

:func:`local_credentials` gives the clients (:func:`workbench.engines.os_client.client`) the
credentials of the node whose URL they talk to.

**Node settings:** bound to 127.0.0.1 on a free HTTP port (or ``port``),
``discovery.type: single-node``, heap ``WORKBENCH_OS_HEAP`` (default 512m),
disk-watermark checks off (a nearly full disk would otherwise make indexes read-only),
audit log off. :func:`up` waits until the cluster is at least yellow.

**Concurrency:** :func:`up` and :func:`down` hold the home's server lock
(:func:`workbench._infra.locks.server_lock`), so two commands on one home never start two nodes.

Java: ``OPENSEARCH_JAVA_HOME``, else ``JAVA_HOME``, else the ``java`` on ``PATH``
(OpenSearch 2.19 runs on Java 11–23; Java 17 is the tested one).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets as _secrets
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ServiceError, WorkbenchError

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"
SECURITY_VERSION = "2.19.1.0"
NEURAL_VERSION = "2.19.1.0"
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
    ("org.opensearch.plugin", "opensearch-security", SECURITY_VERSION, "zip"),
    ("org.opensearch.plugin", "neural-search", NEURAL_VERSION, "zip"),
)

#: plugin folder → the artifactId of its zip in :data:`ARTIFACTS` (the folder is the plugin's descriptor name).
PLUGINS = {"opensearch-knn": "opensearch-knn", "opensearch-security": "opensearch-security",
           "opensearch-neural-search": "neural-search"}

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

#: The node's only user (role ``all_access``); its password is generated per runtime folder.
USER = "workbench"
#: Distinguished names of the node's and the admin's certificates (issued by the home's private CA).
NODE_DN = "CN=workbench-node,O=workbench"
ADMIN_DN = "CN=workbench-admin,O=workbench"
#: The files :func:`ensure_secrets` makes in ``<runtime>/secrets`` (all 0600).
SECRET_FILES = ("ca.pem", "node.pem", "node-key.pem", "admin.pem", "admin-key.pem", "password", "password.bcrypt")
#: The copies the node reads from its config folder: source in the secrets folder → name there.
NODE_FILES = {"ca.pem": "workbench-ca.pem", "node.pem": "workbench-node.pem", "node-key.pem": "workbench-node-key.pem"}
#: Where a root-run workbench keeps the runtime folders (one per home).
SYSTEM_ROOT = Path("/var/lib/workbench-opensearch")




@dataclass
class NodeState:
    """A started node: ``url`` (``https://127.0.0.1:PORT``), ``pid``, its install and data folders, its log,
    its transport port (0 in a state written by an older workbench, whose node had no security plugin)."""

    url: str
    pid: int
    install: str
    data: str
    log: str
    heap: str
    started_at: float
    transport_port: int = 0


#: The fields a state file must have (later fields have defaults: older state files stay readable).
_REQUIRED = ("url", "pid", "install", "data", "log", "heap", "started_at")


@dataclass(frozen=True)
class Credentials:
    """How a client authenticates to the local node: basic-auth ``user``/``password``, and ``ca_certs``,
    the CA certificate file to verify the node's HTTPS certificate with."""

    user: str
    password: str
    ca_certs: str

    def __repr__(self) -> str:  # never print the password
        return f"Credentials(user={self.user!r}, password='***', ca_certs={self.ca_certs!r})"


# ---------------------------------------------------------------- folders

def state_path(home: Path) -> Path:
    """``<home>/services/opensearch.json``: the running node's :class:`NodeState`."""
    return Path(home) / "services" / "opensearch.json"


def runtime_dir(home: Path) -> Path:
    """Where the install, data, logs and secrets live (see the module docstring for the root case)."""
    home = Path(home).resolve()
    if os.geteuid() == 0:
        return SYSTEM_ROOT / hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return home / "services" / "opensearch"


def secrets_dir(home: Path) -> Path:
    """``<runtime>/secrets``: the CA, node and admin certificates and keys, the password (0700, files 0600)."""
    return runtime_dir(home) / "secrets"


def credentials_path(home: Path) -> Path:
    """``<home>/services/opensearch-credentials.json`` (0600): user, password and CA file for the clients."""
    return Path(home) / "services" / "opensearch-credentials.json"


def ca_path(home: Path) -> Path:
    """``<home>/services/opensearch-ca.pem``: the public certificate of the home's private CA (verifies the node)."""
    return Path(home) / "services" / "opensearch-ca.pem"


def recipe_hash() -> str:
    """sha256 (12 hex) of what an install is made of: the artifacts, modules, plugins and the ICU plugin source."""
    h = hashlib.sha256(json.dumps([ARTIFACTS, MODULES, PLUGINS], sort_keys=True).encode())
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
    for plugin, artifact in PLUGINS.items():
        pdir = root / "plugins" / plugin
        pdir.mkdir(parents=True)
        with zipfile.ZipFile(files[artifact]) as z:
            z.extractall(pdir)
    shutil.rmtree(root / "plugins" / "opensearch-security" / "tools", ignore_errors=True)  # demo installer, admin CLI
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


# ---------------------------------------------------------------- secrets

def _write_private(path: Path, data: bytes, ids: tuple[int, int] | None = None) -> None:
    """Replace ``path`` atomically with ``data`` in a file created 0600 (never readable by others, even briefly),
    owned by ``ids`` (uid, gid) when given.

    Raises:
        StorageError: the folder cannot be written (names the path and the fix).
    """
    from workbench._infra.durable import atomic_path

    with atomic_path(path, mode=0o600) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
        if ids is not None:
            os.chown(tmp, *ids)


def _private_dir(path: Path, ids: tuple[int, int] | None = None) -> Path:
    """Create ``path`` (and its parents) and make it a real folder of mode 0700 (owned by ``ids`` when given).

    Raises:
        ServiceError: ``path`` is a link or not a folder (names it and the fix).
        StorageError: it cannot be created.
    """
    from workbench._infra.durable import mkdirs

    mkdirs(path)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ServiceError(f"{path} is a link or not a folder; the OpenSearch node keeps private files there: "
                           "move it away and retry")
    if ids is not None and (st.st_uid, st.st_gid) != ids:
        os.chown(path, *ids)
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def _system_root() -> Path:
    """:data:`SYSTEM_ROOT`, created root-owned with mode 0711 (the root case).

    Raises:
        ServiceError: it exists but is not root's, or others can write to it (someone could swap the runtime folder).
    """
    SYSTEM_ROOT.mkdir(parents=True, exist_ok=True)
    st = os.lstat(SYSTEM_ROOT)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or stat.S_IMODE(st.st_mode) & 0o022:
        raise ServiceError(f"{SYSTEM_ROOT} is not a folder owned by root, or others can write to it (mode "
                           f"{stat.S_IMODE(st.st_mode):o}); fix it (chown root:root, chmod 0711) or remove it, then retry")
    if stat.S_IMODE(st.st_mode) != 0o711:
        SYSTEM_ROOT.chmod(0o711)
    return SYSTEM_ROOT


def _make_certificates() -> dict[str, bytes]:
    """A fresh private CA, and a node and an admin certificate it signs (RSA 2048, PEM, keys PKCS#8).

    The CA's key is not returned: once these are issued nobody can mint another certificate of this CA.
    """
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def name(dn: str) -> x509.Name:
        oids = {"CN": NameOID.COMMON_NAME, "O": NameOID.ORGANIZATION_NAME}
        # a DN string lists the most specific part first; x509.Name wants it last
        return x509.Name([x509.NameAttribute(oids[k], v) for k, v in
                          reversed([part.split("=", 1) for part in dn.split(",")])])

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=3650)
    ca_key = key()
    ca_name = name(f"CN=workbench-ca-{_secrets.token_hex(4)},O=workbench")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    out = {"ca.pem": ca.public_bytes(pem)}
    for stem, dn, usages, san in (
            ("node", NODE_DN, [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
             [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            ("admin", ADMIN_DN, [ExtendedKeyUsageOID.CLIENT_AUTH], None)):
        k = key()
        b = (x509.CertificateBuilder().subject_name(name(dn)).issuer_name(ca_name).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                          crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
             .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        out[f"{stem}.pem"] = b.sign(ca_key, hashes.SHA256()).public_bytes(pem)
        out[f"{stem}-key.pem"] = k.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption())
    return out


def _bcrypt(password: str) -> bytes:
    import bcrypt

    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12))


def ensure_secrets(home: Path, *, ids: tuple[int, int] | None = None, create: bool = True,
                   log: Callable[[str], None] = lambda _m: None) -> Credentials:
    """The node's secrets in ``<runtime>/secrets`` (made once when ``create``: see the module docstring) and the
    client's copy in ``<home>/services`` (rewritten when missing or different); returns the client's
    :class:`Credentials`.

    The runtime folder is made 0700 and owned by ``ids`` (the node's user, when root runs the node as another);
    the secrets folder stays the workbench's user's.

    Raises:
        ServiceError: a secrets folder is a link or not a folder, the secrets are incomplete and ``create`` is
            false, or ``cryptography``/``bcrypt`` is missing.
        StorageError: a file cannot be written (names the path and the fix).
    """
    home = Path(home)
    runtime = runtime_dir(home)
    if os.geteuid() == 0:
        _system_root()
    _private_dir(runtime, ids)
    folder = _private_dir(runtime / "secrets", (os.geteuid(), os.getegid()) if ids is not None else None)
    if not all((folder / name).is_file() for name in SECRET_FILES):
        if not create:
            raise ServiceError(f"the secrets of the running OpenSearch node in {folder} are incomplete; stop it "
                               "(`workbench services down opensearch`) and start it again: new ones are made")
        try:
            files = _make_certificates()
            password = _secrets.token_urlsafe(24)
            files["password.bcrypt"] = _bcrypt(password)
        except ImportError as exc:
            raise ServiceError(f"the local OpenSearch's certificates need the Python package {exc.name!r}: "
                               "pip install -e . (it is a dependency of the workbench)") from None
        files["password"] = password.encode()
        log(f"made a private CA, node and admin certificates and a password for the local OpenSearch in {folder}")
        for name in SECRET_FILES:
            _write_private(folder / name, files[name])
    password = (folder / "password").read_text().strip()
    creds = Credentials(USER, password, str(ca_path(home)))
    ca = (folder / "ca.pem").read_bytes()
    try:
        current = ca_path(home).read_bytes() == ca and _load_credentials(credentials_path(home)) == creds
    except (OSError, ServiceError):
        current = False
    if not current:
        from workbench._infra.durable import atomic_write_bytes

        atomic_write_bytes(ca_path(home), ca)  # public: the CA's certificate, not its key
        _write_private(credentials_path(home), (json.dumps(
            {"user": creds.user, "password": creds.password, "ca_certs": creds.ca_certs}, indent=1) + "\n").encode())
    return creds


def _load_credentials(path: Path) -> Credentials:
    """The :class:`Credentials` in ``path``.

    Raises:
        OSError: the file cannot be read (missing, permission).
        ServiceError: it is not a credentials file.
    """
    try:
        d = json.loads(path.read_text())
        return Credentials(str(d["user"]), str(d["password"]), str(d["ca_certs"]))
    except (ValueError, KeyError, TypeError):
        raise ServiceError(f"{path} is not a credentials file of the local OpenSearch; remove it and run "
                           "`workbench services up opensearch` to rewrite it") from None


def home_credentials(home: Path) -> Credentials | None:
    """The client credentials of ``home``'s local node, or None when the home has none (never started one).

    Raises:
        ServiceError: the file exists but cannot be read (another user's home) or is damaged (names the fix).
    """
    path = credentials_path(home)
    try:
        return _load_credentials(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ServiceError(f"cannot read {path} ({exc.strerror}): the local OpenSearch of {home} is its owner's; "
                           "use your own home (WORKBENCH_HOME) or set WORKBENCH_OS_USER/WORKBENCH_OS_PASSWORD") from None


#: URL → home of the local nodes this process has seen (so a client finds the credentials of a node of a home
#: other than the current one, e.g. ``run_experiment(home=...)``).
_KNOWN: dict[str, Path] = {}


def _same_url(a: str, b: str) -> bool:
    from urllib.parse import urlsplit

    try:
        pa, pb = urlsplit(a.strip().rstrip("/")), urlsplit(b.strip().rstrip("/"))
        loopback = {"127.0.0.1", "localhost", "::1"}
        host = (pa.hostname == pb.hostname) or (pa.hostname in loopback and pb.hostname in loopback)
        return pa.scheme == pb.scheme and host and pa.port == pb.port
    except ValueError:
        return False


def local_credentials(url: str, home: Path | None = None) -> Credentials | None:
    """The credentials of the local node at ``url``: that of ``home`` (default: the current home,
    :func:`workbench.settings.home_dir`), of another home whose node this process started or checked, or of
    the home ``WORKBENCH_OS_HOME`` names (:data:`workbench.engines.os_client.HOME_ENV`); None when ``url`` is
    none of their nodes' URLs.

    Raises:
        ServiceError: the node is this home's but its credentials file cannot be read (names the fix).
    """
    homes: list[Path] = []
    if home is not None:
        homes.append(Path(home))
    homes += [h for u, h in list(_KNOWN.items()) if _same_url(u, url)]
    if not homes:
        from workbench.settings import home_dir

        try:
            homes.append(home_dir())
        except WorkbenchError:
            return None
    shared = os.environ.get("WORKBENCH_OS_HOME", "").strip()
    if shared:
        homes.append(Path(shared).expanduser())
    for h in homes:
        st = _read_state(h, repair=False)
        if st is not None and _same_url(st["url"], url):
            if not st["url"].startswith("https://"):
                return None  # a node of an older workbench, without the security plugin
            return home_credentials(h)
    return None


# ---------------------------------------------------------------- configure

def _yaml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


#: The security plugin's configuration (config/opensearch-security/), but internal_users.yml (made per home).
SECURITY_CONFIG = {
    "config.yml": """_meta: {type: "config", config_version: 2}
config:
  dynamic:
    http:
      anonymous_auth_enabled: false
    authc:
      basic_internal_auth_domain:
        description: "HTTP basic authentication against the internal users (the workbench's only)"
        http_enabled: true
        transport_enabled: true
        order: 0
        http_authenticator: {type: basic, challenge: true}
        authentication_backend: {type: intern}
""",
    "roles_mapping.yml": f"""_meta: {{type: "rolesmapping", config_version: 2}}
all_access:
  reserved: true
  users: ["{USER}"]
  description: "the workbench's user"
""",
    "roles.yml": '_meta: {type: "roles", config_version: 2}\n',
    "action_groups.yml": '_meta: {type: "actiongroups", config_version: 2}\n',
    "tenants.yml": '_meta: {type: "tenants", config_version: 2}\n',
    "nodes_dn.yml": '_meta: {type: "nodesdn", config_version: 2}\n',
    "allowlist.yml": '_meta: {type: "allowlist", config_version: 2}\nconfig: {enabled: false}\n',
    "whitelist.yml": '_meta: {type: "whitelist", config_version: 2}\nconfig: {enabled: false}\n',
    "audit.yml": '_meta: {type: "audit", config_version: 2}\nconfig: {enabled: false}\n',
}


def _configure(target: Path, secrets: Path, *, http_port: int, transport_port: int, data: Path, logs: Path,
               ids: tuple[int, int] | None) -> None:
    """Write the node's ``opensearch.yml``, the security plugin's configuration and the copies of its certificate,
    key and CA into ``<target>/config`` (0700; the secrets 0600, owned by the node's user)."""
    config = _private_dir(target / "config")
    for src, dst in NODE_FILES.items():
        _write_private(config / dst, (secrets / src).read_bytes(), ids)
    ca, cert, key = NODE_FILES["ca.pem"], NODE_FILES["node.pem"], NODE_FILES["node-key.pem"]
    yml = (f"cluster.name: {CLUSTER_NAME}\nnode.name: workbench-1\nnetwork.host: 127.0.0.1\n"
           f"http.port: {http_port}\ntransport.port: {transport_port}\ndiscovery.type: single-node\n"
           f"path.data: {data}\npath.logs: {logs}\ncluster.routing.allocation.disk.threshold_enabled: false\n"
           "action.destructive_requires_name: true\n"
           "# the security plugin: TLS on both ports with this home's CA, basic authentication on HTTP\n"
           f"plugins.security.ssl.transport.pemcert_filepath: {cert}\n"
           f"plugins.security.ssl.transport.pemkey_filepath: {key}\n"
           f"plugins.security.ssl.transport.pemtrustedcas_filepath: {ca}\n"
           "plugins.security.ssl.transport.enforce_hostname_verification: false\n"
           "plugins.security.ssl.http.enabled: true\n"
           f"plugins.security.ssl.http.pemcert_filepath: {cert}\n"
           f"plugins.security.ssl.http.pemkey_filepath: {key}\n"
           f"plugins.security.ssl.http.pemtrustedcas_filepath: {ca}\n"
           "plugins.security.ssl.http.clientauth_mode: OPTIONAL\n"
           "plugins.security.allow_unsafe_democertificates: false\n"
           "plugins.security.allow_default_init_securityindex: true\n"
           f"plugins.security.authcz.admin_dn: {_yaml_list([ADMIN_DN])}\n"
           f"plugins.security.nodes_dn: {_yaml_list([NODE_DN])}\n"
           "plugins.security.nodes_dn_dynamic_config_enabled: false\n"
           "plugins.security.audit.type: noop\n"
           "plugins.security.enable_snapshot_restore_privilege: true\n"
           "plugins.security.check_snapshot_restore_write_privileges: true\n"
           "plugins.security.restapi.roles_enabled: []\n"
           "plugins.security.system_indices.enabled: true\n")
    _write_private(config / "opensearch.yml", yml.encode(), ids)
    sec = _private_dir(config / "opensearch-security", ids)
    users = (f'_meta: {{type: "internalusers", config_version: 2}}\n{USER}:\n'
             f'  hash: "{(secrets / "password.bcrypt").read_text().strip()}"\n  reserved: true\n'
             '  description: "the workbench (its password is in <home>/services/opensearch-credentials.json)"\n')
    for name, text in {**SECURITY_CONFIG, "internal_users.yml": users}.items():
        _write_private(sec / name, text.encode(), ids)
    _owner_only(config)


def _owner_only(folder: Path) -> None:
    """Make every file under ``folder`` 0600 and every folder 0700 (the distribution's jvm.options,
    log4j2.properties, and the keystore the node makes 0660 at its first start)."""
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            try:
                os.chmod(os.path.join(root, name), 0o600)
            except FileNotFoundError:
                pass


# ---------------------------------------------------------------- run

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _service_ids() -> tuple[int, int] | None:
    """(uid, gid) to run the node as: ``None`` when not root, else :data:`SERVICE_USER` (created if missing)."""
    from workbench.services import system_user

    return system_user(SERVICE_USER, "OpenSearch")


def _chown_tree(path: Path, ids: tuple[int, int], skip: Path | None = None) -> None:
    """``chown -R`` without following links, leaving out ``skip`` (the secrets: the node does not read them)."""
    if not path.exists() or (skip is not None and path == skip):
        return
    os.chown(path, *ids, follow_symlinks=False)
    for root, dirs, files in os.walk(path):
        if skip is not None:
            dirs[:] = [d for d in dirs if Path(root, d) != skip]
        for name in [*dirs, *files]:
            try:
                os.chown(os.path.join(root, name), *ids, follow_symlinks=False)
            except FileNotFoundError:
                pass


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` (> 0) exists (:func:`workbench._infra.procs.pid_exists`)."""
    from workbench._infra.procs import pid_exists

    return isinstance(pid, int) and pid > 0 and pid_exists(pid)


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


def _request(url: str, path: str, *, creds: Credentials | None = None, admin: tuple[Path, Path] | None = None,
             method: str = "GET", body: dict | None = None, timeout: float = 2.0) -> tuple[int, dict | None]:
    """``(HTTP status, JSON body)`` of a request to the node; status 0 when nothing (or nothing we trust) answers.

    HTTPS verifies the node's certificate against ``creds.ca_certs``; ``creds`` also gives basic
    authentication, ``admin`` (certificate, key) a client certificate instead.
    """
    req = urllib.request.Request(f"{url}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    if body is not None:
        req.add_header("Content-Type", "application/json")
    ctx = None
    if url.startswith("https://"):
        if creds is None:
            return 0, None  # we cannot tell our node from another: do not talk to it
        try:
            ctx = ssl.create_default_context(cafile=creds.ca_certs)
            if admin is not None:
                ctx.load_cert_chain(str(admin[0]), str(admin[1]))
        except (OSError, ssl.SSLError):
            return 0, None
    if creds is not None and admin is None:
        token = base64.b64encode(f"{creds.user}:{creds.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            out = json.loads(resp.read())
            return resp.status, out if isinstance(out, dict) else None
    except urllib.error.HTTPError as exc:
        try:
            out = json.loads(exc.read())
        except (ValueError, OSError):
            out = None
        return exc.code, out if isinstance(out, dict) else None
    except (urllib.error.URLError, OSError, ValueError, ssl.SSLError):
        return 0, None


def _health(url: str, pid: int | None = None, timeout: float = 2.0, creds: Credentials | None = None) -> str | None:
    """The cluster status (green/yellow/red) at ``url``, or None when nothing answers (or not to ``creds``) — or,
    with ``pid``, when the node answering there is not that process (another node on the port)."""
    return _probe(url, pid, timeout, creds)[1]


def _probe(url: str, pid: int | None, timeout: float, creds: Credentials | None) -> tuple[int, str | None]:
    """``(HTTP status of the health request, cluster status or None)``: see :func:`_health`."""
    code, health = _request(url, "/_cluster/health", creds=creds, timeout=timeout)
    if code != 200 or health is None:
        return code, None
    if pid is not None:
        _code, info = _request(url, "/_nodes/_local/process", creds=creds, timeout=timeout)
        nodes = (info or {}).get("nodes", {})
        if not isinstance(nodes, dict) or not any(n.get("process", {}).get("id") == pid for n in nodes.values()):
            return code, None
    return code, health.get("status")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _belongs_to(st: dict, home: Path) -> bool:
    """Whether a node state's install and data folders lie in this home's runtime folder (a state file
    copied with its home names the original home's node: never this home's to report or stop)."""
    runtime = runtime_dir(home).resolve()
    try:
        return all(Path(st[k]).resolve().is_relative_to(runtime) for k in ("install", "data"))
    except (KeyError, TypeError, ValueError, OSError):
        return False


def _read_state(home: Path, log: Callable[[str], None] = lambda _m: None, *, repair: bool = True) -> dict | None:
    """The saved :class:`NodeState` as a dict, or ``None`` when there is none or it is unreadable.

    With ``repair``, a corrupt file is moved aside to ``opensearch.json.corrupt`` under the home's
    server lock (never trusted: its pid could be anyone's), and ``log`` says so and what to check.

    Raises:
        ServiceError: the file cannot be read for lack of permission (another user's home).
    """
    path = state_path(home)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except PermissionError:
        raise ServiceError(f"cannot read {path}: the local OpenSearch of {home} is another user's; use your own "
                           "home (WORKBENCH_HOME)") from None
    except (OSError, UnicodeDecodeError):
        text = None
    st = _parse_state(text)
    if st is not None and not _belongs_to(st, home):
        if repair:
            from workbench._infra.locks import server_lock

            with server_lock(home, "opensearch", log=log):
                aside = path.with_name(path.name + ".foreign")
                path.replace(aside)
            log(f"the node state file {path} describes the node of another home (it was copied with the home); it "
                f"is moved to {aside} and that node is left alone")
        return None
    if st is not None or not repair:
        return st
    from workbench._infra.locks import server_lock

    with server_lock(home, "opensearch", log=log):
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError):
            text = None
        st = _parse_state(text)
        if st is not None:
            return st
        aside = path.with_name(path.name + ".corrupt")
        path.replace(aside)
    log(f"the node state file {path} was unreadable and is moved to {aside}; if a node of this home still "
        f"runs, find it with `ps aux | grep org.opensearch.bootstrap` and stop it by hand")
    return None


def _parse_state(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        st = json.loads(text)
    except ValueError:
        return None
    if not isinstance(st, dict) or set(_REQUIRED) - set(st) or not isinstance(st["pid"], int) or \
            not isinstance(st["url"], str) or not isinstance(st["install"], str):
        return None
    if not isinstance(st.get("transport_port", 0), int):
        return None
    return {k: st.get(k, 0) for k in NodeState.__dataclass_fields__}


def _write_state(home: Path, state: NodeState) -> None:
    from workbench._infra.durable import atomic_write_json

    path = atomic_write_json(state_path(home), asdict(state), indent=2)
    os.chmod(path, 0o600)


def _node_credentials(home: Path) -> Credentials | None:
    """The credentials to check ``home``'s node with: the client's file, else the secrets folder; None if neither."""
    creds = home_credentials(home)
    if creds is not None:
        return creds
    folder = secrets_dir(home)
    try:
        password = (folder / "password").read_text().strip()
    except OSError:
        return None
    return Credentials(USER, password, str(folder / "ca.pem"))


def status(home: Path, log: Callable[[str], None] = lambda _m: None) -> dict:
    """``{"state": "running"|"starting"|"dead"|"stopped", ...NodeState fields, "health": ...}`` for the node of ``home``.

    ``dead``: the recorded process is gone (or is no longer an OpenSearch of this home's
    install); ``starting``: it lives but does not answer at its URL yet (or not to this
    home's credentials).

    Raises:
        ServiceError: the state or credentials file cannot be read (another user's home).
    """
    st = _read_state(home, log)
    if st is None:
        return {"state": "stopped"}
    _KNOWN[st["url"]] = Path(home)
    alive = _is_node(st["pid"], st["install"])
    creds = _node_credentials(home) if alive and st["url"].startswith("https://") else None
    health = _health(st["url"], st["pid"], creds=creds) if alive else None
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
    """Start the local node of ``home`` (installing it and making its secrets first when needed) and wait until
    it is yellow or green, under the home's server lock.

    A node already running for ``home`` is reused (``port``/``heap`` are then ignored, and ``log`` says so);
    one started by an older workbench without the security plugin is restarted with it.

    Args:
        home: the workbench home.
        port: HTTP port on 127.0.0.1 (default: a free one); it must be free.
        heap: JVM heap, e.g. ``512m``, ``1g`` (default ``WORKBENCH_OS_HEAP`` or 512m; 256m up to half the memory).
        timeout: seconds to wait for the cluster.

    Raises:
        ServiceError: a bad heap, a port in use, install or start failed, the cluster was not
            healthy in time (the message quotes the end of the node's log), or it rejects this
            home's credentials and they could not be reset.
        StorageError: a file of the node or of the home cannot be written.
    """
    from workbench._infra.locks import server_lock

    home = Path(home)
    with server_lock(home, "opensearch", log=log):
        return _up(home, port=port, heap=heap, timeout=timeout, log=log)


def _up(home: Path, *, port: int | None, heap: str | None, timeout: float, log: Callable[[str], None]) -> NodeState:
    current = status(home, log)
    if current["state"] in ("running", "starting") and current["url"].startswith("https://"):
        state = NodeState(**{k: current[k] for k in NodeState.__dataclass_fields__})
        if (port and not state.url.endswith(f":{port}")) or (heap and heap.strip().lower() != state.heap):
            log(f"OpenSearch already runs at {state.url} (heap {state.heap}); --port/--heap are ignored: "
                "`workbench services down opensearch` first to change them")
        creds = ensure_secrets(home, create=False)
        return state if current["state"] == "running" else _wait(state, timeout, creds, secrets_dir(home))
    heap = _check_heap(heap or os.environ.get(HEAP_ENV, "").strip() or DEFAULT_HEAP)
    if current["state"] in ("running", "starting"):
        log(f"the node at {current['url']} was started by an older workbench without the security plugin; "
            "it is stopped and started again with it")
        _stop(home, current, timeout=60.0, log=log)
    if port is not None and not _port_free(port):
        raise ServiceError(f"port {port} on 127.0.0.1 is in use; choose another --port or omit it (a free one is picked)")
    ids = _service_ids()
    runtime = runtime_dir(home)
    creds = ensure_secrets(home, ids=ids, log=log)
    target = install(runtime, log=log)
    data, logs = _private_dir(runtime / "data", ids), _private_dir(runtime / "logs", ids)
    http_port = port or _free_port()
    transport_port = _free_port()
    while transport_port == http_port:
        transport_port = _free_port()
    secrets = secrets_dir(home)
    _configure(target, secrets, http_port=http_port, transport_port=transport_port, data=data, logs=logs, ids=ids)
    if ids is not None:
        _chown_tree(runtime, ids, skip=secrets)
    pidfile = runtime / "opensearch.pid"
    pidfile.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "JAVA_TOOL"))}
    env.update({"OPENSEARCH_JAVA_HOME": _java_home(), "OPENSEARCH_JAVA_OPTS": f"-Xms{heap} -Xmx{heap}",
                "OPENSEARCH_PATH_CONF": str(target / "config"), "DISABLE_INSTALL_DEMO_CONFIG": "true"})
    url = f"https://127.0.0.1:{http_port}"
    log(f"starting OpenSearch on {url} (heap {heap}, logs in {logs})")
    logfile = logs / f"{CLUSTER_NAME}.log"
    console = runtime / "console.log"  # the launcher's own output (bootstrap errors land here)
    deadline = time.monotonic() + timeout
    with open(console, "wb") as out:  # a file, not a pipe: the daemon inherits it and outlives this call
        try:
            proc = subprocess.run([str(target / "bin" / "opensearch"), "-d", "-p", str(pidfile)], env=env,
                                  cwd=str(target), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  user=ids[0] if ids else None, group=ids[1] if ids else None,
                                  extra_groups=[] if ids else None, umask=0o077, timeout=timeout)
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
    state = NodeState(url, pid, str(target), str(data), str(logfile), heap, time.time(), transport_port)
    _write_state(home, state)
    _KNOWN[state.url] = home
    state = _wait(state, max(deadline - time.monotonic(), 1.0), creds, secrets)
    _owner_only(target / "config")
    return state


#: Log lines that name why a node failed, searched for before quoting the log's tail.
_CAUSES = ("BindException", "Address already in use", "Permission denied", "OutOfMemoryError",
           "Could not reserve enough space", "Invalid maximum heap size", "java.lang.IllegalStateException",
           "java.lang.IllegalArgumentException", "OpenSearchSecurityException", "SSLHandshakeException")


def _reset_password(state: NodeState, secrets: Path, creds: Credentials) -> bool:
    """Set the user's hash in the security index to this home's, with the admin certificate; whether it worked."""
    try:
        bcrypt_hash = (secrets / "password.bcrypt").read_text().strip()
    except OSError:
        return False
    code, _out = _request(state.url, f"/_plugins/_security/api/internalusers/{USER}", creds=creds,
                          admin=(secrets / "admin.pem", secrets / "admin-key.pem"), method="PUT",
                          body={"hash": bcrypt_hash, "description": "the workbench (password reset by `services up`)"},
                          timeout=10.0)
    return code in (200, 201)


def _wait(state: NodeState, timeout: float, creds: Credentials | None = None, secrets: Path | None = None) -> NodeState:
    from workbench._infra.progress import bar as progress_bar

    deadline = time.monotonic() + timeout
    refused, reset = 0, False
    # a terminal sees the wait go by; a log gets a line every 30 s of a slow start (no ETA: the timeout is no estimate)
    waiting = progress_bar(None, f"waiting for OpenSearch at {state.url} (up to {timeout:.0f} s)", "s", leave=False,
                           wait=True)
    with waiting:
        return _wait_loop(state, deadline, creds, secrets, waiting, refused, reset)


def _wait_loop(state: NodeState, deadline: float, creds: Credentials | None, secrets: Path | None, waiting: Any,
               refused: int, reset: bool) -> NodeState:
    start = time.monotonic()
    while time.monotonic() < deadline:
        code, health = _probe(state.url, state.pid, 2.0, creds)
        waiting.update(max(0, round(time.monotonic() - start) - waiting.n))
        if health in ("green", "yellow"):
            return state
        if not _pid_alive(state.pid):
            break
        refused = refused + 1 if code == 401 else 0
        if refused >= (10 if reset else 2):  # the security index holds another password (secrets made anew)
            if reset or secrets is None or creds is None or not _reset_password(state, secrets, creds):
                raise ServiceError(f"OpenSearch at {state.url} rejects this home's credentials and they could not be "
                                   f"reset with the admin certificate; stop it (`workbench services down opensearch`), "
                                   f"remove its data folder {state.data} (the workbench's indexes are rebuilt on "
                                   f"the next eval) and start it again")
            reset, refused = True, 0
        time.sleep(0.5)
    lines: list[str] = []
    try:
        lines = Path(state.log).read_text(errors="replace").splitlines()
    except OSError:
        pass
    cause = next((ln.strip() for ln in reversed(lines) if any(c in ln for c in _CAUSES)), "")
    tail = "\n".join(ln for ln in lines[-8:] if not ln.lstrip().startswith("at "))
    died = not _pid_alive(state.pid)
    what = "exited" if died else f"was not healthy after {deadline - start:.0f} s"
    hint = ""
    if "Address already in use" in cause or "BindException" in cause:
        hint = "; its port is taken: choose another --port or omit it"
    raise ServiceError(f"OpenSearch at {state.url} {what}{hint}" + (f"; cause: {cause[:300]}" if cause else "") +
                       f"; see its log {state.log}" + (f":\n{tail}" if tail and not cause else ""))


def down(home: Path, *, timeout: float = 60.0, log: Callable[[str], None] = lambda _m: None) -> bool:
    """Stop the node of ``home``, under the home's server lock; return whether one was running.

    Only a process that is an OpenSearch JVM of this home's install is signalled (a stale
    pid that now belongs to another process is left alone).

    Raises:
        ServiceError: the node did not stop within ``timeout`` seconds, even after SIGKILL, or
            the state file cannot be read (another user's home).
    """
    from workbench._infra.locks import server_lock

    with server_lock(home, "opensearch", log=log):
        st = _read_state(home, log)
        if st is None:
            return False
        return _stop(home, st, timeout=timeout, log=log)


def _stop(home: Path, st: dict, *, timeout: float, log: Callable[[str], None]) -> bool:
    path = state_path(home)
    pid = st["pid"]
    was = _is_node(pid, st["install"])
    if not was and _pid_alive(pid):
        log(f"pid {pid} of {path} is no longer an OpenSearch of this home; it is left alone")
    if was:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _is_node(pid, st["install"]):
            os.kill(pid, signal.SIGKILL)
            time.sleep(1)
            if _pid_alive(pid):
                raise ServiceError(f"OpenSearch (pid {pid}) did not stop; kill it by hand")
    path.unlink(missing_ok=True)
    _KNOWN.pop(st["url"], None)
    return was


def remove(home: Path, *, log: Callable[[str], None] = lambda _m: None) -> list[Path]:
    """Stop the node of ``home`` and delete its install, data, logs, secrets and state; return what was removed.

    The Maven download cache (``~/.m2``) stays. As root the runtime folder is outside the home
    (:data:`SYSTEM_ROOT`), so deleting the home alone would leave it behind.

    Raises:
        ServiceError: the node did not stop.
    """
    from workbench._infra.locks import server_lock

    down(home, log=log)
    gone = []
    with server_lock(home, "opensearch", log=log):
        runtime = runtime_dir(home)
        if runtime.exists():
            shutil.rmtree(runtime, ignore_errors=True)
            gone.append(runtime)
        for f in (state_path(home), credentials_path(home), ca_path(home)):
            if f.exists():
                f.unlink()
                gone.append(f)
    return gone
