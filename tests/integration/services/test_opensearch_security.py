"""The local OpenSearch node answers only to its home's secrets (the security plugin), on a real node.

One node for the module, in a home that other local users may traverse (so only the
files' own modes keep the secrets), started by two ``workbench services up opensearch``
at once: the home's server lock makes one start it and the other reuse it. Then:

* HTTP is HTTPS with this home's CA, and every request without the home's password gets 401;
* the clients find the credentials themselves, also when ``WORKBENCH_OS_URL`` names the node
  (as ``.ci/run`` does), and a client of another home is told what to set;
* the secrets are files only their owner can read; as root, the node runs as its own user
  without root's groups, and a second local user can read none of them and gets 401;
* the transport port drops a plain connection and a TLS one without a certificate of the
  home's CA, and answers one with it;
* secrets lost while the data stay are made anew, and the node takes the new password.

The tests without a node check the certificates, the URL matching and the refusals.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import stat
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import faults
import pytest

from workbench.engines import os_client as osearch
from workbench.services import opensearch as node


def _call(url: str, path: str = "/", *, auth: tuple[str, str] | None = None, cafile: str | None = None) -> tuple[int, dict]:
    """(HTTP status, headers) of a GET; ``cafile`` None: no certificate check (what a stranger would do)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if cafile is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url + path)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def _jvms(install: str) -> list[int]:
    """Pids of the OpenSearch JVMs started from ``install``."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "org.opensearch.bootstrap.OpenSearch" in cmd and install in cmd:
                out.append(int(p.name))
    return out


@pytest.fixture(scope="module")
def secured():
    base = Path(tempfile.mkdtemp(prefix="wb-os-sec-"))
    base.chmod(0o755)  # others may enter the home: only the files' modes protect the secrets
    home = base / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_OS_")}
    env.update({"WORKBENCH_HOME": str(home), "WORKBENCH_OS_HEAP": "384m", "PYTHONPATH": str(faults.REPO)})
    procs = [subprocess.Popen([*faults.WORKBENCH, "services", "up", "opensearch"], env=env, cwd=faults.REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=600) for p in procs]
        for p, (_out, err) in zip(procs, outs):
            assert p.returncode == 0, err
        urls = [out.strip().splitlines()[-1] for out, _err in outs]
        state = json.loads(node.state_path(home).read_text())
        yield SimpleNamespace(home=home, base=base, urls=urls, url=urls[0], state=state, env=env,
                              errs=[err for _out, err in outs])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        node.down(home)
        shutil.rmtree(node.runtime_dir(home), ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.opensearch
def test_two_ups_at_once_start_one_https_node(secured):
    assert secured.urls[0] == secured.urls[1] and secured.url.startswith("https://127.0.0.1:")
    assert secured.state["url"] == secured.url and secured.state["transport_port"] > 0
    assert _jvms(secured.state["install"]) == [secured.state["pid"]]
    assert any("waiting for pid" in err for err in secured.errs), secured.errs  # the second waited for the first


@pytest.mark.opensearch
def test_a_request_without_the_homes_password_gets_401(secured):
    ca = str(node.ca_path(secured.home))
    code, headers = _call(secured.url, "/_cat/indices", cafile=ca)
    assert code == 401 and headers.get("WWW-Authenticate") == 'Basic realm="OpenSearch Security"'
    assert _call(secured.url, "/", auth=("admin", "admin"), cafile=ca)[0] == 401  # no demo users
    assert _call(secured.url, "/", auth=("workbench", "not-the-password"), cafile=ca)[0] == 401
    creds = json.loads(node.credentials_path(secured.home).read_text())
    assert creds["user"] == "workbench" and len(creds["password"]) >= 32
    assert _call(secured.url, "/", auth=(creds["user"], creds["password"]), cafile=ca)[0] == 200


@pytest.mark.opensearch
def test_the_clients_find_the_credentials_also_through_workbench_os_url(secured, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(secured.home))
    for var in (osearch.USER_ENV, osearch.PASSWORD_ENV, osearch.CA_ENV, osearch.VERIFY_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(osearch.URL_ENV, raising=False)
    assert osearch.cluster_url() == secured.url
    monkeypatch.setenv(osearch.URL_ENV, secured.url)  # the CI flow: URL="$(workbench services up opensearch)"
    url = osearch.cluster_url()
    es = osearch.client(url)
    info = osearch.check_cluster(es, url)
    assert info["version"] == node.OPENSEARCH_VERSION and info["status"] in ("green", "yellow")
    assert {"opensearch-knn", "opensearch-security", node.ICU_PLUGIN} <= set(info["plugins"])
    toks = es.indices.analyze(body={"tokenizer": "icu_tokenizer", "filter": ["icu_folding"], "text": "Saṁyutta"})
    assert [t["token"] for t in toks["tokens"]] == ["samyutta"]
    es.indices.create(index="wb-sec-knn", body={"settings": {"index.knn": True, "number_of_replicas": 0},
                                                 "mappings": {"properties": {"v": {"type": "knn_vector", "dimension": 2,
                                                                                   "method": {"name": "hnsw", "engine": "lucene",
                                                                                              "space_type": "l2"}}}}})
    try:
        es.index(index="wb-sec-knn", id="a", body={"v": [1.0, 0.0]}, refresh=True)
        hits = es.search(index="wb-sec-knn", body={"query": {"knn": {"v": {"vector": [1.0, 0.1], "k": 1}}}})
        assert [h["_id"] for h in hits["hits"]["hits"]] == ["a"]
    finally:
        es.indices.delete(index="wb-sec-knn")

    monkeypatch.setenv(osearch.USER_ENV, "workbench")  # explicit credentials win, and a wrong one is named
    monkeypatch.setenv(osearch.PASSWORD_ENV, "wrong")
    monkeypatch.setenv(osearch.CA_ENV, str(node.ca_path(secured.home)))
    with pytest.raises(osearch.OpenSearchError, match=r"refused the credentials \(AuthenticationException"):
        osearch.check_cluster(osearch.client(url), url)


@pytest.mark.opensearch
def test_a_client_of_another_home_is_told_what_to_set(secured, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "other-home"))
    monkeypatch.setattr(node, "_KNOWN", {})  # this process has not seen the node of that home
    for var in (osearch.USER_ENV, osearch.PASSWORD_ENV, osearch.CA_ENV, osearch.VERIFY_ENV):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(osearch.OpenSearchError, match=r"certificate of https://127\.0\.0\.1:\d+ is not trusted.*"
                                                      r"WORKBENCH_OS_CA_CERTS"):
        osearch.check_cluster(osearch.client(secured.url), secured.url)
    monkeypatch.setenv(osearch.CA_ENV, str(node.ca_path(secured.home)))
    with pytest.raises(osearch.OpenSearchError, match=r"refused the credentials.*WORKBENCH_OS_USER"):
        osearch.check_cluster(osearch.client(secured.url), secured.url)
    creds = json.loads(node.credentials_path(secured.home).read_text())
    monkeypatch.setenv(osearch.USER_ENV, creds["user"])
    monkeypatch.setenv(osearch.PASSWORD_ENV, creds["password"])
    assert osearch.check_cluster(osearch.client(secured.url), secured.url)["version"] == node.OPENSEARCH_VERSION


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.mark.opensearch
def test_the_secrets_are_files_only_their_owner_can_read(secured):
    home, runtime = secured.home, node.runtime_dir(secured.home)
    assert _mode(node.credentials_path(home)) == 0o600 and _mode(node.state_path(home)) == 0o600
    assert _mode(runtime) == 0o700
    secrets = node.secrets_dir(home)
    assert _mode(secrets) == 0o700 and sorted(p.name for p in secrets.iterdir()) == sorted(node.SECRET_FILES)
    assert all(_mode(p) == 0o600 for p in secrets.iterdir())
    config = Path(secured.state["install"]) / "config"
    assert _mode(config) == 0o700
    assert [str(p) for p in config.rglob("*") if _mode(p) & 0o077] == []  # node key, yml, jvm.options, keystore
    assert (config / "workbench-node-key.pem").read_bytes() == (secrets / "node-key.pem").read_bytes()
    assert not (secrets / "ca-key.pem").exists()  # the CA's key is not kept: no one can mint another certificate
    pid = secured.state["pid"]
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    if faults.is_root():
        import pwd

        svc = pwd.getpwnam(node.SERVICE_USER)
        assert int(status["Uid"].split()[0]) == svc.pw_uid and status["Groups"].split() == []  # no root groups
        assert os.stat(runtime).st_uid == svc.pw_uid and os.stat(config / "workbench-node-key.pem").st_uid == svc.pw_uid
        assert os.stat(secrets).st_uid == 0 and os.stat(secrets / "admin-key.pem").st_uid == 0
        assert _mode(node.SYSTEM_ROOT) == 0o711 and os.stat(node.SYSTEM_ROOT).st_uid == 0
    else:
        assert int(status["Uid"].split()[0]) == os.geteuid()


@pytest.mark.opensearch
def test_another_local_user_reads_no_secret_and_gets_401(secured):
    user = faults.other_user()
    home, runtime = secured.home, node.runtime_dir(secured.home)
    config = Path(secured.state["install"]) / "config"
    paths = {"credentials": node.credentials_path(home), "state": node.state_path(home),
             "password": node.secrets_dir(home) / "password", "admin key": node.secrets_dir(home) / "admin-key.pem",
             "node key": config / "workbench-node-key.pem", "users": config / "opensearch-security" / "internal_users.yml",
             "runtime": runtime, "data": Path(secured.state["data"])}
    code = f"""
import base64, json, os, ssl, sys, urllib.request, urllib.error
out = {{}}
for name, path in {json.dumps({k: str(v) for k, v in paths.items()})}.items():
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").read()
        out[name] = "read"
    except OSError as exc:
        out[name] = type(exc).__name__
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
for name, auth in (("anonymous", None), ("admin:admin", "admin:admin"), ("workbench:guess", "workbench:workbench")):
    req = urllib.request.Request(sys.argv[1] + "/_cat/indices")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        out[name] = urllib.request.urlopen(req, context=ctx, timeout=30).status
    except urllib.error.HTTPError as exc:
        out[name] = exc.code
print(json.dumps(out))
"""
    res = faults.as_user(user, code, args=[secured.url])
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got == {**{name: "PermissionError" for name in paths}, "anonymous": 401, "admin:admin": 401,
                   "workbench:guess": 401}
    env = {**secured.env, "HOME": "/"}
    res = faults.as_user(user, "from workbench.cli import main; main()", args=["services", "status", "opensearch"],
                         env=env)
    # refused before it reads anything: the home is not theirs
    assert res.returncode == 2 and "belongs to root, not to you" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.opensearch
def test_the_transport_port_drops_strangers_and_answers_its_own_ca(secured, tmp_path):
    port, secrets = secured.state["transport_port"], node.secrets_dir(secured.home)
    ping = b"ES\xff\xff\xff\xff"  # OpenSearch's transport keep-alive ping, which a node echoes
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(ping)
        assert s.recv(64) == b""  # plain TCP: the TLS layer drops it at once (no timeout)

    def tls(cert: Path | None, key: Path | None) -> bytes:
        ctx = ssl.create_default_context(cafile=str(secrets / "ca.pem"))
        ctx.check_hostname = False
        if cert is not None:
            ctx.load_cert_chain(str(cert), str(key))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as s:
            assert dict(x[0] for x in s.getpeercert()["subject"])["commonName"] == "workbench-node"
            s.sendall(ping)
            return s.recv(64)

    with pytest.raises(ssl.SSLError, match="certificate"):
        tls(None, None)  # no client certificate
    foreign = node._make_certificates()  # another CA's admin certificate, same DN
    for name in ("admin.pem", "admin-key.pem"):
        (tmp_path / name).write_bytes(foreign[name])
    with pytest.raises(ssl.SSLError, match="certificate"):
        tls(tmp_path / "admin.pem", tmp_path / "admin-key.pem")
    assert tls(secrets / "admin.pem", secrets / "admin-key.pem") == ping


@pytest.mark.opensearch
def test_lost_secrets_are_made_anew_and_the_node_takes_the_new_password(secured):
    home = secured.home
    old = json.loads(node.credentials_path(home).read_text())["password"]
    assert node.down(home) is True
    shutil.rmtree(node.secrets_dir(home))
    node.credentials_path(home).unlink()
    st = node.up(home, heap="384m", log=lambda _m: None)  # same data: the security index holds the old hash
    new = json.loads(node.credentials_path(home).read_text())["password"]
    ca = str(node.ca_path(home))
    assert new != old
    assert _call(st.url, "/", auth=("workbench", old), cafile=ca)[0] == 401
    assert _call(st.url, "/", auth=("workbench", new), cafile=ca)[0] == 200
    assert node.status(home)["state"] == "running"


# ---------------------------------------------------------------- without a node

def test_the_secrets_are_a_ca_signed_node_certificate_and_a_bcrypt_hash_made_once(tmp_path):
    import bcrypt
    from cryptography import x509

    home = tmp_path / "home"
    try:
        creds = node.ensure_secrets(home)
        folder = node.secrets_dir(home)
        ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
        cert = x509.load_pem_x509_certificate((folder / "node.pem").read_bytes())
        admin = x509.load_pem_x509_certificate((folder / "admin.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        admin.verify_directly_issued_by(ca)
        assert cert.subject.rfc4514_string() == node.NODE_DN and admin.subject.rfc4514_string() == node.ADMIN_DN
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        assert san.get_values_for_type(x509.DNSName) == ["localhost"]
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
        assert bcrypt.checkpw(creds.password.encode(), (folder / "password.bcrypt").read_bytes())
        assert creds.user == "workbench" and creds.ca_certs == str(node.ca_path(home))
        assert node.ca_path(home).read_bytes() == (folder / "ca.pem").read_bytes()
        assert "password='***'" in repr(creds) and creds.password not in repr(creds)
        assert _mode(folder) == 0o700 and {_mode(p) for p in folder.iterdir()} == {0o600}
        assert _mode(node.credentials_path(home)) == 0o600
        node.credentials_path(home).unlink()
        assert node.ensure_secrets(home) == creds  # made once; the client's copy is rewritten
        assert node.home_credentials(home) == creds
    finally:
        shutil.rmtree(node.runtime_dir(home), ignore_errors=True)


def _fake_node(home):
    """The state and credentials files of a local node of ``home`` at https://127.0.0.1:9201 (no process)."""
    node.state_path(home).parent.mkdir(parents=True)
    node.state_path(home).write_text(json.dumps({
        "url": "https://127.0.0.1:9201", "pid": 999999999, "install": str(node.runtime_dir(home) / "install"),
        "data": str(node.runtime_dir(home) / "data"), "log": "", "heap": "512m",
        "started_at": 0, "transport_port": 9301}))
    node.credentials_path(home).write_text(json.dumps({"user": "workbench", "password": "s3cret", "ca_certs": "/x.pem"}))


def test_the_client_takes_only_the_credentials_of_the_node_at_that_url(tmp_path, monkeypatch):
    home = tmp_path
    for var in (osearch.USER_ENV, osearch.PASSWORD_ENV, osearch.CA_ENV, osearch.VERIFY_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(node, "_KNOWN", {})
    _fake_node(home)
    want = node.Credentials("workbench", "s3cret", "/x.pem")
    assert node.local_credentials("https://127.0.0.1:9201", home) == want
    assert node.local_credentials("https://localhost:9201/", home) == want
    assert node.local_credentials("https://127.0.0.1:9202", home) is None
    assert node.local_credentials("http://127.0.0.1:9201", home) is None
    assert node.local_credentials("https://search.example.org:9201", home) is None
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    es = osearch.client("https://127.0.0.1:9201")
    assert es.transport.kwargs["http_auth"] == ("workbench", "s3cret") and es.transport.kwargs["ca_certs"] == "/x.pem"
    assert "http_auth" not in osearch.client("https://127.0.0.1:9202").transport.kwargs
    monkeypatch.setenv(osearch.CA_ENV, str(tmp_path / "missing.pem"))
    with pytest.raises(osearch.OpenSearchError, match=r"WORKBENCH_OS_CA_CERTS=.*missing\.pem' is not a file"):
        osearch.client("https://search.example.org:9200")


def test_workbench_os_home_lends_its_nodes_credentials_for_that_url_only(tmp_path, monkeypatch):
    """The test workers' case: each has its own home, the node is the first home's (``WORKBENCH_OS_HOME``)."""
    shared, mine = tmp_path / "shared", tmp_path / "mine"
    for var in (osearch.USER_ENV, osearch.PASSWORD_ENV, osearch.CA_ENV, osearch.VERIFY_ENV, osearch.HOME_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(node, "_KNOWN", {})
    _fake_node(shared)
    mine.mkdir()
    monkeypatch.setenv("WORKBENCH_HOME", str(mine))
    assert node.local_credentials("https://127.0.0.1:9201") is None  # another home's node: not found
    monkeypatch.setenv(osearch.HOME_ENV, str(shared))
    assert node.local_credentials("https://127.0.0.1:9201") == node.Credentials("workbench", "s3cret", "/x.pem")
    assert node.local_credentials("https://127.0.0.1:9202") is None  # only for that node's URL
    es = osearch.client("https://127.0.0.1:9201")
    assert es.transport.kwargs["http_auth"] == ("workbench", "s3cret") and es.transport.kwargs["ca_certs"] == "/x.pem"
    assert "http_auth" not in osearch.client("https://127.0.0.1:9202").transport.kwargs


def test_a_system_root_others_can_write_is_refused(tmp_path, monkeypatch):
    base = tmp_path / "base"
    base.mkdir()
    base.chmod(0o777)
    monkeypatch.setattr(node, "SYSTEM_ROOT", base)
    with pytest.raises(node.ServiceError, match=r"not a folder owned by root, or others can write to it \(mode 777\)"):
        node._system_root()


def test_a_state_file_copied_with_its_home_never_names_this_homes_node(tmp_path):
    """``cp -a`` of a home while its node runs copies ``opensearch.json``: the copy must neither report
    nor stop the original's node (a live process stands in for it here)."""
    import subprocess
    import time as _time

    from workbench.services.opensearch import NodeState, _write_state

    original, copy = tmp_path / "a", tmp_path / "b"
    original.mkdir()
    copy.mkdir()
    stand_in = subprocess.Popen(["sleep", "60"])
    try:
        runtime = node.runtime_dir(original)
        _write_state(copy, NodeState("https://127.0.0.1:9", stand_in.pid, str(runtime / "opensearch-2.19.1-x"),
                                     str(runtime / "data"), str(runtime / "logs" / "w.log"), "512m", _time.time(), 9))
        said: list[str] = []
        assert node.status(copy, log=said.append) == {"state": "stopped"}
        assert len(said) == 1 and "describes the node of another home" in said[0]
        assert (copy / "services" / "opensearch.json.foreign").is_file()
        assert node.down(copy) is False
        assert stand_in.poll() is None  # never signalled
    finally:
        stand_in.kill()
        stand_in.wait()
