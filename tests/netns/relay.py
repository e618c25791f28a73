#!/usr/bin/env python3
"""A TCP relay that delays what it forwards: the delay stage of tests/netns/netns.sh.

The router namespace's nftables rules redirect every TCP connection that crosses it to
this relay (`redirect to :PORT`); the relay reads the connection's original destination
(SO_ORIGINAL_DST), connects there, and forwards each chunk it reads after a delay of
DELAY plus a uniform jitter in [0, JITTER), never before the chunk read before it (a TCP
stream stays in order; chunks of different connections overtake each other). The kernel
in use has no netem qdisc: this is the delay that netem would add.

Signals:
  SIGUSR1  toggles "link down": nothing is forwarded (chunks wait), and new connections
           are refused (reset at once), until the next SIGUSR1
  SIGUSR2  resets every connection in flight (both sides get a TCP RST)
  SIGTERM  exits

Usage: relay.py --port PORT [--delay-ms 10] [--jitter-ms 2] [--ready FILE]
"""

import argparse
import asyncio
import random
import signal
import socket
import struct
import sys
import time

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
CHUNK = 65536
QUEUED_CHUNKS = 64  # per direction: reading stops when this many wait (back-pressure)


def original_destination(sock):
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(packed), port


def reset(sock):
    """Closes a socket with an RST instead of a FIN (SO_LINGER, zero seconds)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class Relay:
    def __init__(self, delay_s, jitter_s):
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.up = asyncio.Event()
        self.up.set()
        self.pairs = set()  # (writer, writer) of each connection in flight
        self.counts = {"connections": 0, "refused": 0, "resets": 0}

    def toggle_link(self):
        if self.up.is_set():
            self.up.clear()
        else:
            self.up.set()
        state = "forwarding again" if self.up.is_set() else "stopped: holding data, refusing"
        print(f"relay: {state}", file=sys.stderr, flush=True)

    def reset_all(self):
        n = 0
        for a, b in list(self.pairs):
            for w in (a, b):
                sock = w.get_extra_info("socket")
                if sock is not None:
                    reset(sock)
                w.transport.abort()
            n += 1
        self.pairs.clear()
        self.counts["resets"] += n
        print(f"relay: reset {n} connection(s)", file=sys.stderr, flush=True)

    async def pump(self, reader, writer):
        queue = asyncio.Queue(QUEUED_CHUNKS)

        async def read():
            last = 0.0
            while True:
                data = await reader.read(CHUNK)
                due = max(last, time.monotonic() + self.delay_s + random.uniform(0, self.jitter_s))
                last = due
                await queue.put((due, data))
                if not data:
                    return

        async def write():
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                await self.up.wait()
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.ensure_future(read()), asyncio.ensure_future(write())]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def handle(self, client_reader, client_writer):
        sock = client_writer.get_extra_info("socket")
        if not self.up.is_set():
            self.counts["refused"] += 1
            reset(sock)
            client_writer.transport.abort()
            return
        self.counts["connections"] += 1
        host, port = original_destination(sock)
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port)
        except OSError:
            reset(sock)
            client_writer.transport.abort()
            return
        pair = (client_writer, server_writer)
        self.pairs.add(pair)
        pumps = [
            asyncio.ensure_future(self.pump(client_reader, server_writer)),
            asyncio.ensure_future(self.pump(server_reader, client_writer)),
        ]
        try:
            # Both directions end at their EOF; an error in one (a reset) ends both.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for t in pumps:
                t.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self.pairs.discard(pair)
            for w in pair:
                w.transport.abort()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, default=10)
    ap.add_argument("--jitter-ms", type=float, default=2)
    ap.add_argument("--ready", help="file written once the relay listens")
    args = ap.parse_args()
    relay = Relay(args.delay_ms / 1000, args.jitter_ms / 1000)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, relay.toggle_link)
    loop.add_signal_handler(signal.SIGUSR2, relay.reset_all)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    server = await asyncio.start_server(relay.handle, "0.0.0.0", args.port, backlog=256)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write(f"{args.port}\n")
    async with server:
        await stop.wait()
    print(f"relay: {relay.counts}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
