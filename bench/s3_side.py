"""boto3's side of bench/s3_compare.sh, and the uploads it makes once.

Usage: python3 bench/s3_side.py --endpoint URL COMMAND ...

  upload-keys BUCKET PREFIX --count N --folders F   N zero-byte keys PREFIX/FFF/kNNNNNNN
                                                  spread over F sub-prefixes
  upload-dir BUCKET DIR                           every file under DIR as its relative path
  list BUCKET PREFIX                              boto3's list_objects_v2 paginator (pages of
                                                  1000): {"keys", "requests", "seconds"}
  get MANIFEST --threads T                        get_object and read whole every object of
                                                  MANIFEST (lines s3://bucket/key), T at once
                                                  (a ThreadPoolExecutor): {"objects",
                                                  "bytes", "seconds"}
  download BUCKET KEY                             download_fileobj into a sink that keeps
                                                  nothing: {"bytes", "seconds", ...}

Uploads use 16 threads. The key pair comes from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY; the client is path-style, region us-east-1, SigV4, with a
connection pool as wide as its threads. "seconds" is timed from after the client is made
(boto3's import and client creation, "startup_seconds", are left out); the results are
one JSON line on stdout.
"""

import argparse
import concurrent.futures
import json
import os
import sys
import time
from typing import Any, Dict, List

STARTED = time.monotonic()

import boto3  # noqa: E402  (imported after STARTED: its import is part of the startup)
import botocore.config  # noqa: E402


def client(endpoint: str, pool: int) -> Any:
    """A boto3 S3 client for `endpoint` with `pool` connections."""
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        config=botocore.config.Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                      max_pool_connections=max(10, pool),
                                      retries={"max_attempts": 3, "mode": "standard"}))


def in_threads(fn: Any, items: List[Any], threads: int) -> List[Any]:
    """fn(item) for every item, `threads` at once; the first exception is raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))


def upload_keys(s3: Any, a: argparse.Namespace) -> Dict[str, Any]:
    """Zero-byte keys spread over sub-prefixes."""
    ensure_bucket(s3, a.bucket)
    per = a.count // a.folders
    keys = [f"{a.prefix}/{i // per:03d}/k{i:07d}" for i in range(a.count)]
    in_threads(lambda k: s3.put_object(Bucket=a.bucket, Key=k, Body=b""), keys, 16)
    return {"uploaded": len(keys)}


def upload_dir(s3: Any, a: argparse.Namespace) -> Dict[str, Any]:
    """Every file under a folder, keyed by its relative path."""
    ensure_bucket(s3, a.bucket)
    files = []
    for dirpath, _, names in os.walk(a.dir):
        files += [os.path.join(dirpath, n) for n in names]
    in_threads(lambda f: s3.upload_file(f, a.bucket, os.path.relpath(f, a.dir)), sorted(files), 16)
    return {"uploaded": len(files)}


def ensure_bucket(s3: Any, bucket: str) -> None:
    """Creates `bucket` unless it exists."""
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        s3.create_bucket(Bucket=bucket)


def list_keys(s3: Any, a: argparse.Namespace) -> Dict[str, Any]:
    """The paginator's listing of a prefix (pages of 1000), timed."""
    t = time.monotonic()
    keys = pages = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=a.bucket, Prefix=a.prefix):
        pages += 1
        keys += len(page.get("Contents", []))
    return {"keys": keys, "requests": pages, "seconds": time.monotonic() - t}


def get_all(s3: Any, a: argparse.Namespace) -> Dict[str, Any]:
    """Every object of a manifest read whole, a.threads at once."""
    with open(a.manifest) as f:
        objects = [line.strip()[len("s3://"):].split("/", 1) for line in f if line.strip()]
    t = time.monotonic()
    sizes = in_threads(lambda o: len(s3.get_object(Bucket=o[0], Key=o[1])["Body"].read()), objects,
                       a.threads)
    return {"objects": len(objects), "bytes": sum(sizes), "seconds": time.monotonic() - t}


class NullSink:
    """A writable file object that counts the bytes and keeps none."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, b: bytes) -> int:
        """Counts `b`."""
        self.bytes += len(b)
        return len(b)


def download(s3: Any, a: argparse.Namespace) -> Dict[str, Any]:
    """download_fileobj of one object into a NullSink (boto3's default transfer config)."""
    sink = NullSink()
    t = time.monotonic()
    s3.download_fileobj(a.bucket, a.key, sink)
    return {"bytes": sink.bytes, "seconds": time.monotonic() - t}


def parse(argv: List[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--endpoint", required=True)
    sub = p.add_subparsers(dest="command", required=True)
    k = sub.add_parser("upload-keys")
    k.add_argument("bucket")
    k.add_argument("prefix")
    k.add_argument("--count", type=int, required=True)
    k.add_argument("--folders", type=int, required=True)
    d = sub.add_parser("upload-dir")
    d.add_argument("bucket")
    d.add_argument("dir")
    ls = sub.add_parser("list")
    ls.add_argument("bucket")
    ls.add_argument("prefix")
    g = sub.add_parser("get")
    g.add_argument("manifest")
    g.add_argument("--threads", type=int, required=True)
    dl = sub.add_parser("download")
    dl.add_argument("bucket")
    dl.add_argument("key")
    return p.parse_args(argv)


def main(argv: List[str]) -> int:
    """Runs one command and prints its JSON line."""
    a = parse(argv)
    commands = {"upload-keys": upload_keys, "upload-dir": upload_dir, "list": list_keys, "get": get_all,
                "download": download}
    s3 = client(a.endpoint, getattr(a, "threads", 16))
    startup = time.monotonic() - STARTED
    result = commands[a.command](s3, a)
    print(json.dumps(dict(result, startup_seconds=round(startup, 4))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
