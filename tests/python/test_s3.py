"""s3:// from Python and from `dataecho pipe`, against the real S3 test server that the C++
tests use (@20minutes/s3rver under Node.js: tests/s3/server, installed by
scripts/bootstrap.sh; it verifies SigV4 signatures). The objects are uploaded by boto3,
an independent client; what is read over s3:// equals the local read, and a wrong secret
raises the named error without the secret in it."""

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import boto3
import botocore.config
import pytest

import dataecho as de
from conftest import ROOT

SERVER_DIR = ROOT / "tests" / "s3" / "server"
KEY_ID = "AKIADATAECHOTEST0001"
SECRET = "dataecho/test+secret/s3rver0123456789abcd"
SHARDS = "tfrecord/train-{00000..00003}-of-00004.tfrecord"


def start_server(store: Path) -> Tuple["subprocess.Popen[str]", str]:
    """The S3 test server on a free loopback port over the folder `store`, started as
    tests/s3/s3_server.cc starts it (with OpenSSL 3's legacy provider, where the server's
    DES continuation tokens are): the process and its endpoint."""
    assert (SERVER_DIR / "node_modules" / "@20minutes" / "s3rver").is_dir(), \
        f"{SERVER_DIR}/node_modules has no @20minutes/s3rver: run scripts/bootstrap.sh"
    proc = subprocess.Popen(
        ["node", "--openssl-legacy-provider", str(SERVER_DIR / "start.js"), "--directory", str(store),
         "--port", "0", "--access-key-id", KEY_ID, "--secret-access-key", SECRET],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()  # "listening 127.0.0.1:PORT", or "" when it died
    if not line.startswith("listening 127.0.0.1:"):
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"the S3 test server did not start: {line!r} {err}")
    return proc, "http://" + line.split(" ", 1)[1]


def upload(endpoint: str, root: Path, names: List[str]) -> None:
    """Bucket "data" holding each file `root`/name as key name, by boto3 (path-style)."""
    s3 = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=botocore.config.Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    s3.create_bucket(Bucket="data")
    for name in names:
        s3.upload_file(str(root / name), "data", name)


@pytest.fixture(scope="module")
def s3_endpoint(shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's endpoint; bucket "data" holds the tfrecord shards and lines.txt under
    the same names as the `shards` folder."""
    with open(shards / "lines.txt", "w") as f:
        f.writelines(f"line {i} of the text\n" for i in range(40))
    proc, endpoint = start_server(tmp_path_factory.mktemp("s3_store"))
    try:
        upload(endpoint, shards, [f"tfrecord/train-{i:05d}-of-00004.tfrecord" for i in range(4)] + ["lines.txt"])
        yield endpoint
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The server's key pair as AWS_* variables, and no other AWS configuration."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


def rows(d: de.PipelineDef) -> List[Tuple[List[int], Dict[str, bytes]]]:
    """Every element's ids and fields' bytes."""
    return [(b.ids, {k: bytes(v) for k, v in b.items()}) for b in d.build(seed=1, as_numpy=True)]


def test_tfrecord_and_text_over_s3_equal_the_local_read(shards: Path, s3_endpoint: str, aws_env: None) -> None:
    s3: Dict[str, Any] = {"endpoint": s3_endpoint}
    local = rows(de.tfrecord(str(shards / SHARDS), raw=True))
    assert len(local) == 600
    assert rows(de.tfrecord("s3://data/" + SHARDS, raw=True, s3=s3)) == local
    # A listed glob and the generic source spelling read the same.
    assert rows(de.source("tfrecord", uri="s3://data/tfrecord/*.tfrecord", raw=True, s3=s3)) == local
    lines = rows(de.text("s3://data/lines.txt", s3=s3))
    assert lines == rows(de.text(str(shards / "lines.txt")))
    assert lines[3][1]["text"] == b"line 3 of the text"


def test_a_wrong_secret_raises_the_named_error_without_the_secret(s3_endpoint: str, aws_env: None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "not/the+secret0123456789of-the-server"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    with pytest.raises(de.Error) as e:
        list(de.text("s3://data/lines.txt", s3={"endpoint": s3_endpoint}).build())
    message = str(e.value)
    assert "the secret access key does not match the key id" in message
    assert "SignatureDoesNotMatch" in message and "s3://data/lines.txt" in message
    assert wrong not in message and SECRET not in message


def pipe(dataecho_bin: str, spec: Dict[str, Any], tmp_path: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    """`dataecho pipe` on `spec` (written to a file) with `args`, in this environment."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return subprocess.run([dataecho_bin, "pipe", str(path), "--values", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_pipe_reads_s3_with_the_s3_object_and_the_aws_variables(shards: Path, s3_endpoint: str, aws_env: None,
                                                                    dataecho_bin: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def spec(uri: str) -> Dict[str, Any]:
        return {"seed": 1, "source": {"kind": "tfrecord", "uri": uri, "raw": True, "s3": {"endpoint": s3_endpoint}},
                "stages": []}

    local = pipe(dataecho_bin, spec(str(shards / SHARDS)), tmp_path)
    assert local.returncode == 0, local.stderr
    remote = pipe(dataecho_bin, spec("s3://data/" + SHARDS), tmp_path, "--stats-json", str(tmp_path / "stats.json"))
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and len(remote.stdout.splitlines()) == 600
    stats = (tmp_path / "stats.json").read_text()
    assert '"s3_requests"' in stats or '"http_requests"' in stats
    assert SECRET not in stats
    # A wrong secret: a nonzero exit whose message names the object and S3's code, not the secret.
    wrong = "not/the+secret0123456789of-the-server"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    failed = pipe(dataecho_bin, spec("s3://data/" + SHARDS), tmp_path)
    assert failed.returncode != 0
    assert "SignatureDoesNotMatch" in failed.stderr
    assert "s3://data/tfrecord/train-00000-of-00004.tfrecord" in failed.stderr
    assert wrong not in failed.stderr + failed.stdout
