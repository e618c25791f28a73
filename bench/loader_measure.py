"""What the Python sides of bench/dataloader_compare.sh share.

bench/dataloader_compare.py (torch's DataLoader) and bench/ffcv_side.py (FFCV) measure
with this one piece of code, the same rule as bench/dataloader_bench.cc:

* measure_windows: a window runs epochs back to back until at least `window_seconds`
  have passed since its first batch; its rate is the images after that batch over the
  time from it to the last (neither side pays for starting once, both pay every later
  epoch's start). Images per CPU-second over the same window: this process (all its
  threads) plus its worker processes, from /proc; and the machine's other load over the
  window (`windows_other_cores`: the cores everything else kept busy, from /proc/stat).
* PssSampler: the peak over time of the summed PSS of this process and its worker
  processes, sampled every 0.2 s on a thread of its own.
* proc_kib / vm_hwm_kib / pss_kib: /proc fields.

Imports nothing beyond the standard library, so that importing it adds nothing to a
side's memory.
"""
import os
import sys
import threading
import time


def proc_kib(pid, name, key, missing=None):
    """A "Key: N kB" field of /proc/PID/NAME, in KiB (`missing` once the process has gone)."""
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return missing


def vm_hwm_kib(pid):
    return proc_kib(pid, "status", "VmHWM:")


def pss_kib(pid):
    """Proportional set size of a process (shared pages divided among their users)."""
    return proc_kib(pid, "smaps_rollup", "Pss:", 0)


class PssSampler:
    """The peak over time of the summed PSS of this process and its workers, sampled
    every 0.2 s on a thread of its own (workers' pids are set as they start)."""

    def __init__(self):
        self.pids = [os.getpid()]
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.2):
            self.peak_kib = max(self.peak_kib, sum(pss_kib(p) for p in list(self.pids)))

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak_kib


TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """utime + stime of a process, seconds (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except OSError:
        return 0.0


def machine_busy_s():
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat's "cpu"
    line: user, nice, system, irq, softirq, steal): over a window, that less the measured
    processes' own CPU time is the load of everything else."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / TICKS


def cpu_s(pids):
    """CPU seconds of this process (all threads) and of the workers `pids`."""
    return time.process_time() + sum(proc_cpu_s(p) for p in pids)


def measure_windows(loader, windows, window_seconds, pss, worker_pids=lambda it: []):
    """Runs `windows` measured windows over `loader` (iterable; each iter() is an epoch
    of (images, labels) batches). worker_pids(iterator): the worker processes of that
    epoch (none for a loader that runs in this process). Returns a dict: the per-window
    rates, the first batch's shape, dtype and layout, images and batches of an epoch,
    the first epoch's worker pids."""
    rates, cpu_rates, others = [], [], []
    first_batch = None
    images = batches = 0
    first_workers = []
    for window in range(windows):
        first = None
        first_cpu = first_busy = 0.0
        after_first = nb_window = passes = 0
        pids = []
        while first is None or time.perf_counter() - first < window_seconds:
            it = iter(loader)
            pids = worker_pids(it)
            pss.pids = [os.getpid()] + pids
            n = nb = 0
            for x, _y in it:
                rows = x.shape[0]
                if nb_window == 0:
                    first = time.perf_counter()
                    first_cpu = cpu_s(pids)
                    first_busy = machine_busy_s()
                    if first_batch is None:
                        first_batch = {"batch_shape": list(x.shape), "batch_dtype": str(x.dtype),
                                       "batch_contiguous": bool(x.is_contiguous())}
                else:
                    after_first += rows
                n += rows
                nb += 1
                nb_window += 1
            images, batches = n, nb
            passes += 1
            if not first_workers:
                first_workers = pids
        dt = time.perf_counter() - first
        own = cpu_s(pids) - first_cpu
        others.append(max(0.0, (machine_busy_s() - first_busy - own) / dt))
        rates.append(after_first / dt)
        cpu_rates.append(after_first / own)
        print(f"  window {window}: {passes} passes, {dt:.1f} s, {rates[-1]:.0f} images/s,"
              f" {cpu_rates[-1]:.0f} images/cpu-s, other load {others[-1]:.2f} cores", file=sys.stderr)
    return {"rates": rates, "cpu_rates": cpu_rates, "others": others, "first_batch": first_batch or {},
            "images": images, "batches": batches, "worker_pids": first_workers}


def summary(m, window_seconds):
    """The JSON keys every Python side reports from measure_windows' result: the median
    window, with min and max."""
    srt = sorted(m["rates"])
    return {
        "images_per_s": srt[len(srt) // 2],
        "median_images_per_s": srt[len(srt) // 2],
        "min_images_per_s": srt[0],
        "max_images_per_s": srt[-1],
        "epochs_images_per_s": m["rates"],
        "window_seconds": window_seconds,
        "images_per_cpu_s": sorted(m["cpu_rates"])[len(m["cpu_rates"]) // 2],
        "epochs_images_per_cpu_s": m["cpu_rates"],
        "windows_other_cores": m["others"],
        "max_other_cores": max(m["others"]),
        "images_per_epoch": m["images"],
        "batches_per_epoch": m["batches"],
        **m["first_batch"],
    }
