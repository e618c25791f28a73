#!/usr/bin/python3
"""A loopback HTTP/1.1 proxy in front of the S3 test server that answers S3's errors on demand.

The S3 test server (tests/s3/server) cannot answer 503 SlowDown, 500 InternalError,
AccessDenied or a wrong region; this proxy does, by script, for the tests of retries and
named errors. Every other request is relayed unchanged: the request head byte for byte
(Host included, so SigV4 signatures still verify) and its body, on one upstream
connection per client connection (keep-alive is kept on both sides). Every request is
recorded (method, target, headers and how it was answered). Python's standard library
only; a thread per connection.

  fault_proxy.py --upstream 127.0.0.1:PORT [--port N]

Prints "listening 127.0.0.1:PORT" once it listens (--port 0, the default: a free port),
then reads commands from stdin, one JSON object a line, and answers each with one JSON
line on stdout; it exits when stdin closes.

  {"fault": KIND, "path": P, "query": Q, "times": N, "method": M, "region": R, "bytes": K}
      answer the next N requests (default 1; -1: every one) whose path (the target
      without its query) is P ("/bucket/key"; "/bucket/pre*" matches a prefix; "*" or
      no path: any), whose query, if Q is given, holds Q ("prefix=a%2F": one listing's
      prefix) and, if given, whose method is M, with KIND:
        slowdown      503 SlowDown
        unavailable   503 ServiceUnavailable
        internal      500 InternalError
        timeout       400 RequestTimeout
        denied        403 AccessDenied
        redirect      301 PermanentRedirect, header x-amz-bucket-region: R (default
                      eu-west-1) and the endpoint of that region in the XML
        malformed     400 AuthorizationHeaderMalformed naming region R in <Region>
        cut           relay the request, then only the response head and its first K
                      body bytes (default 0), and close the connection
      Faults are matched in the order given; a request takes the first that matches.
      -> {"ok": true}
  {"log": true}    -> {"requests": [{"method", "target", "headers": [[name, value], ...],
                       "answer": "forwarded" or the fault's KIND}, ...]}
  {"clear": true}  forget the faults and the log -> {"ok": true}

Error answers carry S3's XML error body (Code, Message, Resource, RequestId, HostId;
the fields S3 documents for each code) with Content-Type application/xml and
x-amz-request-id; a HEAD gets the same status and headers without a body, as from S3.
"""
import argparse
import json
import secrets
import socket
import socketserver
import sys
import threading
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

# KIND: (status, reason, S3 error code, message)
ERRORS: Dict[str, Tuple[int, str, str, str]] = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "unavailable": (503, "Service Unavailable", "ServiceUnavailable", "Reduce your request rate."),
    "internal": (500, "Internal Server Error", "InternalError",
                 "We encountered an internal error. Please try again."),
    "timeout": (400, "Bad Request", "RequestTimeout",
                "Your socket connection to the server was not read from or written to within "
                "the timeout period. Idle connections will be closed."),
    "denied": (403, "Forbidden", "AccessDenied", "Access Denied"),
    "redirect": (301, "Moved Permanently", "PermanentRedirect",
                 "The bucket you are attempting to access must be addressed using the specified "
                 "endpoint. Please send all future requests to this endpoint."),
    "malformed": (400, "Bad Request", "AuthorizationHeaderMalformed",
                  "The authorization header is malformed; the region 'us-east-1' is wrong; "
                  "expecting '{region}'"),
}
KINDS = set(ERRORS) | {"cut"}
MAX_HEAD = 64 * 1024


class Script:
    """The faults still to answer and the log of requests, shared by the connections."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.faults: List[Dict[str, Any]] = []
        self.log: List[Dict[str, Any]] = []

    def add(self, fault: Dict[str, Any]) -> None:
        """Adds a fault after checking its fields."""
        kind = fault.get("fault")
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r} (one of {', '.join(sorted(KINDS))})")
        times = fault.get("times", 1)
        if not isinstance(times, int) or times == 0 or times < -1:
            raise ValueError(f"times must be a positive count or -1, not {times!r}")
        with self.lock:
            self.faults.append(dict(fault, times=times))

    def take(self, method: str, target: str, headers: List[List[str]]) -> Optional[Dict[str, Any]]:
        """Logs the request and returns the fault that answers it (None: relay it)."""
        path, _, query = target.partition("?")
        with self.lock:
            chosen = None
            for f in self.faults:
                if matches(f, method, path, query):
                    chosen = dict(f)
                    if f["times"] > 0:
                        f["times"] -= 1
                    break
            self.faults = [f for f in self.faults if f["times"] != 0]
            self.log.append({"method": method, "target": target, "headers": headers,
                             "answer": chosen["fault"] if chosen else "forwarded"})
            return chosen


def matches(fault: Dict[str, Any], method: str, path: str, query: str) -> bool:
    """Whether `fault` answers a request of `method` for `path` with `query`."""
    if fault.get("method") not in (None, method):
        return False
    if str(fault.get("query", "")) not in query:
        return False
    want = str(fault.get("path", "*"))
    if want == "*":
        return True
    if want.endswith("*"):
        return path.startswith(want[:-1])
    return path == want


def read_head(f: BinaryIO) -> Optional[List[bytes]]:
    """The lines of one message head (start line and headers, with their CRLF), or None
    at a clean end of the connection."""
    lines: List[bytes] = []
    size = 0
    while True:
        line = f.readline(MAX_HEAD + 1)
        if not line:
            if lines:
                raise ConnectionError("connection closed inside a message head")
            return None
        size += len(line)
        if size > MAX_HEAD:
            raise ConnectionError("message head over 64 KiB")
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            return lines


def header_pairs(head: List[bytes]) -> List[List[str]]:
    """[name, value] of each header line of `head`."""
    out = []
    for line in head[1:-1]:
        name, _, value = line.decode("latin-1").partition(":")
        out.append([name.strip(), value.strip()])
    return out


def header(pairs: List[List[str]], name: str) -> str:
    """The value of the first header called `name` (any case), or ""."""
    for n, v in pairs:
        if n.lower() == name:
            return v
    return ""


def relay_body(src: BinaryIO, dst: Optional[socket.socket], pairs: List[List[str]],
               limit: int = -1) -> bool:
    """Copies one message body framed by `pairs` (Content-Length or chunked) from `src` to
    `dst` (None: reads it only). With `limit` >= 0 sends only that many bytes of it and
    returns False (the caller closes); True when the whole body went."""
    sent = 0

    def send(data: bytes) -> bool:
        nonlocal sent
        if limit >= 0 and sent + len(data) > limit:
            if dst is not None:
                dst.sendall(data[:limit - sent])
            return False
        sent += len(data)
        if dst is not None:
            dst.sendall(data)
        return True

    if "chunked" in header(pairs, "transfer-encoding").lower():
        while True:
            size_line = src.readline(1024)
            if not size_line:
                raise ConnectionError("connection closed inside a chunked body")
            size = int(size_line.split(b";")[0].strip(), 16)
            data = size_line + src.read(size + 2) if size else size_line
            while size == 0:  # the trailers, up to the blank line
                more = src.readline(MAX_HEAD)
                data += more
                if more in (b"\r\n", b"\n", b""):
                    break
            if not send(data):
                return False
            if size == 0:
                return True
    length = int(header(pairs, "content-length") or 0)
    while length > 0:
        data = src.read(min(length, 1 << 16))
        if not data:
            raise ConnectionError("connection closed inside a body")
        length -= len(data)
        if not send(data):
            return False
    return True


def error_response(kind: str, fault: Dict[str, Any], method: str, path: str) -> bytes:
    """The whole HTTP response S3 sends for the error `kind`."""
    status, reason, code, message = ERRORS[kind]
    region = str(fault.get("region", "eu-west-1"))
    bucket = path.lstrip("/").split("/", 1)[0]
    request_id = secrets.token_hex(8).upper()
    extra = ""
    headers = [f"x-amz-request-id: {request_id}", "Content-Type: application/xml"]
    if kind == "redirect":
        extra = (f"<Endpoint>{bucket}.s3.{region}.amazonaws.com</Endpoint>"
                 f"<Bucket>{bucket}</Bucket>")
        headers.append(f"x-amz-bucket-region: {region}")
    elif kind == "malformed":
        message = message.format(region=region)
        extra = f"<Region>{region}</Region>"
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message>{extra}<Resource>{path}</Resource>"
            f"<RequestId>{request_id}</RequestId><HostId>{secrets.token_hex(16)}</HostId>"
            "</Error>").encode()
    headers.append(f"Content-Length: {len(body)}")
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    return head.encode() + (b"" if method == "HEAD" else body)


class Handler(socketserver.StreamRequestHandler):
    """One client connection: its requests in turn, relayed on one upstream connection."""

    server: "Proxy"
    upstream: Optional[socket.socket] = None
    upstream_file: Optional[BinaryIO] = None

    def handle(self) -> None:
        try:
            while self.one_request():
                pass
        except (ConnectionError, OSError, ValueError):
            pass
        finally:
            if self.upstream is not None:
                self.upstream.close()

    def one_request(self) -> bool:
        """Reads, answers or relays one request; False when the connection ends."""
        head = read_head(self.rfile)
        if head is None:
            return False
        method, target, version = head[0].decode("latin-1").split(" ", 2)
        pairs = header_pairs(head)
        fault = self.server.script.take(method, target, pairs)
        if header(pairs, "expect").lower() == "100-continue":
            self.connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        keep = (header(pairs, "connection").lower() != "close"
                and version.strip() == "HTTP/1.1")
        if fault is not None and fault["fault"] != "cut":
            relay_body(self.rfile, None, pairs)
            path = target.split("?", 1)[0]
            self.connection.sendall(error_response(fault["fault"], fault, method, path))
            return keep
        up = self.upstream_socket()
        up.sendall(b"".join(head))
        relay_body(self.rfile, up, pairs)
        limit = int(fault.get("bytes", 0)) if fault is not None else -1
        return self.relay_response(method, limit) and keep

    def upstream_socket(self) -> socket.socket:
        """The connection to the server, opened on first use."""
        if self.upstream is None:
            self.upstream = socket.create_connection(self.server.upstream_address)
            self.upstream_file = self.upstream.makefile("rb")
        return self.upstream

    def relay_response(self, method: str, limit: int) -> bool:
        """Relays the server's response (its first `limit` body bytes when >= 0, then the
        connection is cut); False when the connection must close."""
        assert self.upstream_file is not None
        while True:
            head = read_head(self.upstream_file)
            if head is None:
                raise ConnectionError("the server closed the connection")
            status = int(head[0].split()[1])
            if status != 100:  # the client got its 100 Continue from the proxy
                break
        pairs = header_pairs(head)
        self.connection.sendall(b"".join(head))
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return limit < 0
        framed = header(pairs, "content-length") or "chunked" in header(
            pairs, "transfer-encoding").lower()
        if not framed:  # the body runs to the end of the connection
            data = self.upstream_file.read() or b""
            self.connection.sendall(data if limit < 0 else data[:limit])
            return False
        whole = relay_body(self.upstream_file, self.connection, pairs, limit)
        return whole and header(pairs, "connection").lower() != "close"


class Proxy(socketserver.ThreadingTCPServer):
    """The listening proxy: its script and where it relays to."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, upstream: Tuple[str, int]) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.script = Script()
        self.upstream_address = upstream


def command(script: Script, line: str) -> Dict[str, Any]:
    """Runs one control command and returns its answer."""
    try:
        cmd = json.loads(line)
        if not isinstance(cmd, dict):
            raise ValueError("a command is a JSON object")
        if cmd.get("log"):
            with script.lock:
                return {"requests": list(script.log)}
        if cmd.get("clear"):
            with script.lock:
                script.faults.clear()
                script.log.clear()
            return {"ok": True}
        script.add(cmd)
        return {"ok": True}
    except ValueError as e:
        return {"error": str(e)}


def main(argv: List[str]) -> int:
    """Listens, prints the port, then serves commands from stdin until it closes."""
    p = argparse.ArgumentParser(description="S3 fault-injecting loopback proxy for tests")
    p.add_argument("--upstream", required=True, help="HOST:PORT of the S3 test server")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    proxy = Proxy(args.port, (host, int(port)))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    print(f"listening 127.0.0.1:{proxy.server_address[1]}", flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(command(proxy.script, line)), flush=True)
    proxy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
