"""Runs a consumer command and measures what it prints, for bench/service_compare.sh and
bench/service_scale.sh.

Usage: python3 bench/service_meter.py --out FILE [--label L] [--untimed-batches K]
                                      [--pid NAME=PID[:IFACE]]... -- CMD...

CMD (`dataecho pipe SPEC`, or `ip netns exec NS dataecho pipe ...`, which execs it) prints
one JSON line per batch with its "ids". Each line is timed as it arrives; at each line
the meter also reads, for every --pid, the process's CPU time (user + system, all its
threads: /proc/PID/stat) and, given IFACE, the bytes received on that interface of the
process's network namespace (/proc/PID/net/dev), and the consumer's own CPU time.

The window: from the arrival of the K-th batch (--untimed-batches, default 1: the first)
to the last; its rate is the images of the batches after the K-th over that time (no
side pays for its start, every side pays what happens between its batches). CPU
seconds and bytes received over the same window, per process. Whole-run figures beside
it: the images over the command's wall time (from its start to its exit), and the
consumer's CPU and peak RSS from wait4's rusage (the figures /usr/bin/time -v reports);
the load average before the start. Writes FILE (JSON) and prints a progress line on
standard error every 2 s.
"""

import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of PID, all its threads (None once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def rx_bytes(pid, iface):
    """Bytes received on IFACE in PID's network namespace (None when unknown)."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == iface:
                    return int(rest.split()[0])
    except (OSError, IndexError, ValueError):
        pass
    return None


def parse_pids(specs):
    """NAME=PID[:IFACE] -> {name: (pid, iface or None)}."""
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        pid, _, iface = rest.partition(":")
        out[name] = (int(pid), iface or None)
    return out


def sample(pids, consumer):
    """One reading of every watched process: CPU seconds and bytes received."""
    s = {"consumer": {"cpu_s": cpu_seconds(consumer)}}
    for name, (pid, iface) in pids.items():
        s[name] = {"cpu_s": cpu_seconds(pid)}
        if iface:
            s[name]["rx_bytes"] = rx_bytes(pid, iface)
    return s


def read_lines(proc, pids, label, t0):
    """Every batch line: [(seconds since t0, images, sample)]; progress on stderr."""
    batches, images, last_said = [], 0, t0
    for line in proc.stdout:
        now = time.monotonic()
        try:
            n = len(json.loads(line)["ids"])
        except (ValueError, KeyError, TypeError):
            continue
        images += n
        batches.append((now - t0, n, sample(pids, proc.pid)))
        if now - last_said >= 2:
            rate = (images - batches[0][1]) / max(1e-9, batches[-1][0] - batches[0][0])
            print(f"  {label}: {now - t0:.1f} s, {images} images, {rate:.0f} images/s since the first batch",
                  file=sys.stderr, flush=True)
            last_said = now
    return batches


def difference(a, b, key):
    if a is None or b is None or a.get(key) is None or b.get(key) is None:
        return None
    return b[key] - a[key]


def window(batches, untimed):
    """The window's images, seconds, rate, and per process CPU s and bytes received."""
    if len(batches) <= untimed or untimed < 1:
        return {"batches": 0, "images": 0, "seconds": 0.0, "images_per_s": None, "processes": {}}
    first, last = batches[untimed - 1], batches[-1]
    images = sum(n for _, n, _ in batches[untimed:])
    seconds = last[0] - first[0]
    w = {"batches": len(batches) - untimed, "images": images, "seconds": seconds,
         "images_per_s": images / seconds if seconds > 0 else None,
         "starts_s": first[0], "processes": {}}
    for name in last[2]:
        p = {"cpu_s": difference(first[2].get(name), last[2][name], "cpu_s")}
        rx = difference(first[2].get(name), last[2][name], "rx_bytes")
        if rx is not None:
            p["rx_bytes"] = rx
            p["rx_mbit_per_s"] = 8 * rx / seconds / 1e6 if seconds > 0 else None
        if p["cpu_s"] is not None and seconds > 0:
            p["cores"] = p["cpu_s"] / seconds
        w["processes"][name] = p
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--label", default="run")
    ap.add_argument("--untimed-batches", type=int, default=1)
    ap.add_argument("--pid", action="append", default=[])
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    pids = parse_pids(a.pid)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1 << 16)
    batches = read_lines(proc, pids, a.label, t0)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    images = sum(n for _, n, _ in batches)
    result = {
        "cmd": cmd, "loadavg_before": load, "exit_status": os.waitstatus_to_exitcode(status), "wall_s": wall,
        "images": images, "batches": len(batches),
        "first_batch_s": batches[0][0] if batches else None,
        "whole_images_per_s": images / wall if wall > 0 else None,
        "consumer_cpu_s": usage.ru_utime + usage.ru_stime,
        "consumer_peak_rss_kib": usage.ru_maxrss,
        "untimed_batches": a.untimed_batches,
        "window": window(batches, a.untimed_batches),
    }
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    w = result["window"]
    rate = f"{w['images_per_s']:.0f}" if w["images_per_s"] else "-"
    print(f"  {a.label}: {images} images in {wall:.1f} s; window {w['images']} images in "
          f"{w['seconds']:.2f} s = {rate} images/s; exit {result['exit_status']}", file=sys.stderr, flush=True)
    return 0 if result["exit_status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
