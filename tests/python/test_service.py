"""The data service from Python (docs/service.md): ``PipelineDef.distribute`` and
``dataecho.service_status`` against real ``dataecho dispatcher`` and ``dataecho worker``
processes on 127.0.0.1, started as tests/service/processes_test.cc starts them (port 0,
the ports read from the lines they print, a token file). Skipped where the build has no
``dataecho`` command or no gRPC plugin."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import List

import pytest

import dataecho as de

TOKEN = "py-service-token"


def _line(proc: subprocess.Popen, seconds: float = 20) -> str:
    """The next line of ``proc``'s standard output within ``seconds`` ("" if none)."""
    out, end = b"", time.monotonic() + seconds
    while not out.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            break
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            break
        out += chunk
    return out.decode().strip()


def _start(argv: List[str], log: str, expect: str) -> SimpleNamespace:
    """A process of the dataecho command and what its first line says after ``expect``;
    skips the module when the build cannot load the gRPC plugin."""
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
    line = _line(proc)
    if not line.startswith(expect):
        proc.kill()
        proc.wait()
        why = open(log).read()
        if "grpc" in why.lower():
            pytest.skip(f"this build cannot load the gRPC plugin: {why.strip()}")
        pytest.fail(f"{argv[1]} printed {line!r}: {why}")
    return SimpleNamespace(proc=proc, address=line[len(expect):])


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """A dispatcher and one worker, both with the token; yields their addresses and the
    token file."""
    b = os.environ.get("DATAECHO_BIN", "")
    if not os.access(b, os.X_OK):
        pytest.skip("no dataecho command (set DATAECHO_BIN; the build may have DATAECHO_BUILD_CLI=OFF)")
    d = tmp_path_factory.mktemp("service")
    token_file = d / "token"
    token_file.write_text(TOKEN + "\n")
    tok = ["--token-file", str(token_file)]
    dispatcher = _start([b, "dispatcher", "--port", "0", "--bind", "127.0.0.1", *tok], str(d / "dispatcher.log"),
                        "listening on ")
    try:
        worker = _start([b, "worker", "--dispatcher", dispatcher.address, "--bind", "127.0.0.1", *tok],
                        str(d / "worker.log"), "worker w1 serving on ")
    except BaseException:
        dispatcher.proc.kill()
        dispatcher.proc.wait()
        raise
    yield SimpleNamespace(bin=b, address=dispatcher.address, worker=worker.address, token_file=str(token_file),
                          dir=d)
    for p in (worker.proc, dispatcher.proc):
        p.send_signal(signal.SIGTERM)
    assert [p.wait(20) for p in (worker.proc, dispatcher.proc)] == [0, 0]


def _ids(p: de.Pipeline) -> List[int]:
    return [i for b in p for i in b.ids]


def test_distribute_round_trips_json():
    upstream = de.range(100).map("square").filter("id_mod", mod=3).seed(3)
    d = upstream.distribute("10.0.0.2:5050", job="train", sharding="dynamic", lanes=6).shuffle(10).batch(4)
    spec = d.to_spec()
    assert spec["source"]["kind"] == "service"
    assert spec["source"]["pipeline"] == upstream.to_spec()  # the upstream nested, its seed with it
    assert {k: spec["source"][k] for k in ("dispatcher", "job", "sharding", "lanes")} == {
        "dispatcher": "10.0.0.2:5050", "job": "train", "sharding": "dynamic", "lanes": 6}
    assert [s["op"] for s in d.stages] == ["shuffle", "batch"]  # the trainer's side
    assert de.PipelineDef.from_spec(json.loads(json.dumps(spec))) == d
    assert de.service("10.0.0.2:5050", "train", upstream, sharding="dynamic", lanes=6) == \
        upstream.distribute("10.0.0.2:5050", "train", sharding="dynamic", lanes=6)


def test_what_cannot_be_distributed_is_refused():
    with pytest.raises(ValueError, match="distribute: the pipeline has no source"):
        de.source("").distribute("127.0.0.1:1", job="j")
    once = de.range(4).distribute("127.0.0.1:1", job="j")
    with pytest.raises(ValueError, match="distribute: the pipeline's source is a service source already"):
        once.distribute("127.0.0.1:1", job="k")
    with pytest.raises(ValueError, match=r"distribute: the workers build the upstream from its JSON spec.*"
                                         r"\$\.stages\[0\]\.fn: the map function is the Python callable"):
        de.range(4).map(lambda x: x).distribute("127.0.0.1:1", job="j")
    with pytest.raises(de.SpecError, match=r"\$\.source\.lanes: expected an integer in \[1, 65536\]"):
        de.range(4).distribute("127.0.0.1:1", job="j", lanes=0).build()


def test_for_epoch_sets_the_jobs_epoch():
    d = de.range(4).distribute("127.0.0.1:1", job="j").map(lambda x: x)
    assert d.for_epoch(0) is d
    spec = d.for_epoch(3)._d.to_json()
    assert spec["source"]["epoch"] == 3 and spec["source"]["pipeline"] == d._d.to_json()["source"]["pipeline"]
    assert d.for_epoch(3)._callables == d._callables  # the trainer's stages keep their callables
    # An epoch the definition names already is the first pass's: epoch k adds to it.
    assert de.range(4).distribute("127.0.0.1:1", job="j", epoch=2).for_epoch(3)._d.to_json()["source"]["epoch"] == 5


@pytest.mark.parametrize("sharding", ["off", "dynamic"])
def test_an_epoch_over_a_local_worker(service, sharding):
    d = (de.range(2000).filter("id_mod", mod=2)
         .distribute(service.address, job=f"py-epoch-{sharding}", sharding=sharding, token_file=service.token_file,
                     connect_timeout_s=20)
         .shuffle(64).batch(50))
    with d.build(seed=1) as p:
        ids = _ids(p)
    # One worker: in either mode each id of the upstream once ("dynamic": whatever the
    # workers, the records dealt in pieces).
    assert sorted(ids) == list(range(0, 2000, 2))
    assert ids != sorted(ids)  # the trainer's side shuffled


def test_a_repeat_after_the_source_reads_the_next_epochs(service):
    d = (de.range(300).distribute(service.address, job="py-epochs", sharding="dynamic", token_file=service.token_file)
         .repeat(2))
    with d.build() as p:
        batches = list(p)
    ids = [i for b in batches for i in b.ids]
    assert sorted(ids) == sorted(list(range(300)) * 2)
    assert sorted(e for b in batches for e in b.epochs) == [0] * 300 + [1] * 300


def test_each_pass_of_a_loop_reads_the_jobs_next_epoch(service):
    d = (de.range(600).distribute(service.address, job="py-passes", sharding="dynamic", token_file=service.token_file)
         .shuffle(600).batch(50))
    p = d.build(seed=4)
    passes = []
    for epoch in range(2):
        batches = list(p)  # a second `for` over an exhausted pipeline starts the next epoch
        assert p.epoch == epoch
        passes.append([i for b in batches for i in b.ids])
        assert {e for b in batches for e in b.epochs} == {epoch}  # the job's epoch, on the rows
    p.close()
    for ids in passes:
        assert sorted(ids) == list(range(600))
    assert passes[0] != passes[1]  # the trainer's shuffle draws anew each epoch
    with d.build(seed=4, epoch=1) as q:  # an epoch asked for directly: the same job epoch again
        assert sorted(_ids(q)) == list(range(600))


def test_each_pass_of_a_dataloader_reads_the_jobs_next_epoch(service):
    torch = pytest.importorskip("torch")
    d = (de.range(400).distribute(service.address, job="py-loader", sharding="dynamic", token_file=service.token_file)
         .shuffle(400).batch(40))
    loader = torch.utils.data.DataLoader(de.TorchIterable(d, seed=2, provenance=True), batch_size=None,
                                         num_workers=0)
    passes = [[int(i) for b in loader for i in b["__ids__"]] for _ in range(2)]
    for ids in passes:
        assert sorted(ids) == list(range(400))
    assert passes[0] != passes[1]


def test_state_dict_resumes_the_epoch(service):
    d = de.range(2000).distribute(service.address, job="py-resume", sharding="dynamic",
                                  token_file=service.token_file)
    with d.build() as p:
        first = [next(p).ids[0] for _ in range(700)]
        try:
            state = p.state_dict()
        except de.Error as e:
            if "keeps no position" in str(e):
                pytest.skip(f"the service source's save and restore are not built yet: {e}")
            raise
    with d.build() as q:
        q.load_state_dict(state)
        rest = _ids(q)
    assert sorted(first + rest) == list(range(2000))


def test_dataloader_workers_are_refused():
    torch = pytest.importorskip("torch")
    d = de.range(10).distribute("127.0.0.1:1", job="j").batch(2)
    with pytest.raises(de.SpecError, match=r"StatefulDataLoader: the pipeline's source is a service source.*"
                                           r"use num_workers=0, not 2"):
        de.StatefulDataLoader(de.TorchIterable(d), num_workers=2)
    loader = iter(torch.utils.data.DataLoader(de.TorchIterable(d), batch_size=None, num_workers=1))
    try:
        with pytest.raises(de.SpecError, match=r"TorchIterable: the pipeline's source is a service source, whose "
                                               r"upstream runs on the service's workers: use num_workers=0, not 1"):
            next(loader)
    finally:
        loader._shutdown_workers()  # now, not at a later garbage collection (5 s)


def test_service_status(service):
    with de.range(10).distribute(service.address, job="py-status", token_file=service.token_file).build() as p:
        assert len(_ids(p)) == 10
    status = de.service_status(service.address, token_file=service.token_file)
    assert {j["name"]: j["sharding"] for j in status["jobs"]}["py-status"] == "off"
    assert [w["address"] for w in status["workers"]] == [service.worker]
    assert status["workers"][0]["alive"] is True
    # The same JSON as `dataecho service status --json`.
    cli = json.loads(subprocess.run([service.bin, "service", "status", service.address, "--json",
                                     "--token-file", service.token_file],
                                    check=True, capture_output=True, text=True).stdout)
    assert set(cli) == set(status) and cli["jobs"] == status["jobs"]
    assert [set(w) for w in cli["workers"]] == [set(w) for w in status["workers"]]


def test_wrong_token_is_refused(service, monkeypatch):
    wrong = service.dir / "wrong-token"
    wrong.write_text("not-the-token\n")
    with pytest.raises(de.Error, match=f"the dispatcher at {service.address} refused this status client's token "
                                       r"\(check token_file or DATAECHO_SERVICE_TOKEN\)") as e:
        de.service_status(service.address, token_file=wrong)
    assert "not-the-token" not in str(e.value) and TOKEN not in str(e.value)
    monkeypatch.delenv("DATAECHO_SERVICE_TOKEN", raising=False)
    with pytest.raises(de.Error, match="needs a token and this status client has none"):
        de.service_status(service.address)
    d = de.range(10).distribute(service.address, job="py-wrong-token", token_file=wrong, connect_timeout_s=5)
    with pytest.raises(de.Error, match="refused this consumer's token"):
        with d.build() as p:
            _ids(p)


def test_an_unreachable_dispatcher_is_named(service):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    start = time.monotonic()
    with pytest.raises(de.Error, match=address):
        de.service_status(address, timeout_s=0.5)
    assert time.monotonic() - start < 5


def test_service_status_reads_the_ca_it_is_given(tmp_path):
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(de.Error, match=f"ca_file: cannot read {missing}"):
        de.service_status("127.0.0.1:1", ca_file=missing, timeout_s=0.5)
    (tmp_path / "empty").mkdir()
    with pytest.raises(de.Error, match=r"ca_path: the folder .*empty has no \.pem or \.crt file"):
        de.service_status("127.0.0.1:1", ca_path=tmp_path / "empty", timeout_s=0.5)


def test_service_status_over_tls(service, tmp_path):
    """A dispatcher serving TLS with a certificate for 127.0.0.1 and localhost that openssl
    makes (as tests/service/processes_test.cc makes it); skipped without openssl."""
    if subprocess.run(["openssl", "version"], capture_output=True).returncode != 0:
        pytest.skip("no openssl to make the test's certificates")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    (tmp_path / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for argv in (["req", "-x509", "-days", "2", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=ca"],
                 ["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
                 ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                  "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem"]):
        subprocess.run(["openssl", *argv], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "roots").mkdir()
    (tmp_path / "roots" / "ca.crt").write_text((tmp_path / "ca.pem").read_text())
    tls = _start([service.bin, "dispatcher", "--port", "0", "--bind", "127.0.0.1", "--tls-cert",
                  str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server.key")],
                 str(tmp_path / "dispatcher.log"), "listening on ")
    try:
        port = tls.address.rsplit(":", 1)[1]
        for kwargs in ({"ca_file": tmp_path / "ca.pem"}, {"ca_path": str(tmp_path / "roots")},
                       {"ca_file": tmp_path / "ca.pem", "tls_server_name": "localhost"}):
            assert de.service_status(f"127.0.0.1:{port}", timeout_s=5, **kwargs)["jobs"] == []
        with pytest.raises(de.Error, match=f"TLS failed.*127.0.0.1:{port}"):
            de.service_status(f"127.0.0.1:{port}", ca_file=tmp_path / "ca.pem", tls_server_name="elsewhere.example",
                              timeout_s=5)
        with pytest.raises(de.Error, match=f"if the server serves TLS, give its CA.*127.0.0.1:{port}"):
            de.service_status(f"127.0.0.1:{port}", timeout_s=5)
    finally:
        tls.proc.send_signal(signal.SIGTERM)
        assert tls.proc.wait(20) == 0


def test_import_does_not_load_grpc(service):
    # A fresh process: the maps of this one hold the plugin once a test above called it.
    code = (
        "import sys, dataecho as de\n"
        "d = de.range(4).distribute(sys.argv[1], job='j', token_file=sys.argv[2]).batch(2)\n"
        "before = open('/proc/self/maps').read()\n"
        "de.service_status(sys.argv[1], token_file=sys.argv[2])\n"
        "after = open('/proc/self/maps').read()\n"
        "print(int('dataecho/_core' in before), int('grpc' in before.lower()), int('grpc' in after.lower()))\n")
    out = subprocess.run([sys.executable, "-c", code, service.address, service.token_file], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == ["1", "0", "1"]  # the extension mapped, gRPC not; the plugin once the service is used
