#!/usr/bin/python3
"""The S3 tests' independent client: boto3 (Debian's python3-boto3) creates buckets,
uploads fixtures and reads objects back, so that a bug shared by dataecho's writer and
reader cannot hide. Path-style addressing, region us-east-1, no retries.

  fixtures.py --endpoint URL --access-key-id ID --secret-access-key SECRET COMMAND ...

  bucket NAME                    create the bucket (one that exists is kept)
  put BUCKET PATH [PREFIX]       upload the file PATH as key PREFIX (default: its name),
                                 or every file under the folder PATH as PREFIX + its
                                 relative path ('/'-separated)
  get BUCKET KEY OUT             write the object's bytes to OUT
  list BUCKET [PREFIX]           print every key under PREFIX, one a line (all pages)

get and list print nothing else when they succeed. A refusal by the server prints one
line "error CODE STATUS" (S3's error code and HTTP status) and exits 3; a cut
connection or another failure of the transfer prints "error TYPE: message" and exits 4;
bad arguments exit 2. The secret is passed on the command line: test keys only.
"""
import argparse
import os
import sys
from typing import Any, List, Tuple

try:
    import boto3
    import botocore.config
    import botocore.exceptions
except ImportError as e:  # a new machine without python3-boto3
    sys.exit(f"fixtures.py: cannot import boto3 ({e}): run scripts/bootstrap.sh")


def client(args: argparse.Namespace) -> Any:
    """A boto3 S3 client for the endpoint and key pair of `args`."""
    config = botocore.config.Config(s3={"addressing_style": "path"},
                                    retries={"total_max_attempts": 1, "mode": "standard"},
                                    signature_version="s3v4")
    return boto3.session.Session().client(
        "s3", endpoint_url=args.endpoint, region_name="us-east-1",
        aws_access_key_id=args.access_key_id, aws_secret_access_key=args.secret_access_key,
        config=config)


def files_under(path: str, prefix: str) -> List[Tuple[str, str]]:
    """(local file, key) for the file `path` or every file under the folder `path`."""
    if os.path.isfile(path):
        return [(path, prefix or os.path.basename(path))]
    if not os.path.isdir(path):
        sys.exit(f"fixtures.py: {path}: no such file or folder")
    out: List[Tuple[str, str]] = []
    for dirpath, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(dirpath, name)
            out.append((full, prefix + os.path.relpath(full, path).replace(os.sep, "/")))
    return out


def run(s3: Any, args: argparse.Namespace) -> None:
    """Runs the command of `args` with the client `s3`."""
    if args.command == "bucket":
        try:
            s3.create_bucket(Bucket=args.name)
        except botocore.exceptions.ClientError as e:  # s3rver: BucketAlreadyExists
            if e.response.get("Error", {}).get("Code") not in ("BucketAlreadyExists",
                                                               "BucketAlreadyOwnedByYou"):
                raise
    elif args.command == "put":
        for local, key in files_under(args.path, args.prefix):
            with open(local, "rb") as f:
                s3.put_object(Bucket=args.bucket, Key=key, Body=f.read())
    elif args.command == "get":
        body = s3.get_object(Bucket=args.bucket, Key=args.key)["Body"].read()
        with open(args.out, "wb") as f:
            f.write(body)
    elif args.command == "list":
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket,
                                                            Prefix=args.prefix)
        for page in pages:
            for item in page.get("Contents", []):
                print(item["Key"])


def parse(argv: List[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description="boto3 fixtures for the S3 tests")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--access-key-id", required=True)
    p.add_argument("--secret-access-key", required=True)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("bucket").add_argument("name")
    put = sub.add_parser("put")
    put.add_argument("bucket")
    put.add_argument("path")
    put.add_argument("prefix", nargs="?", default="")
    get = sub.add_parser("get")
    for name in ("bucket", "key", "out"):
        get.add_argument(name)
    ls = sub.add_parser("list")
    ls.add_argument("bucket")
    ls.add_argument("prefix", nargs="?", default="")
    return p.parse_args(argv)


def main(argv: List[str]) -> int:
    """Runs one command; the exit status says how it ended (see the module's text)."""
    args = parse(argv)
    try:
        run(client(args), args)
    except botocore.exceptions.ClientError as e:
        error = e.response.get("Error", {})
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        print(f"error {error.get('Code', '?')} {status}", flush=True)
        return 3
    except (botocore.exceptions.BotoCoreError, OSError) as e:
        print(f"error {type(e).__name__}: {e}", flush=True)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
