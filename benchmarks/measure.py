"""Measuring instruments: wall-clock timings, peak memory, and a description of the machine.

Timings are `time.perf_counter` intervals (monotonic, sub-µs resolution). A `Timing` keeps
every sample, so the median, min and max printed are of the actual runs, never smoothed.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples in seconds; `stopped` marks runs cut off at a time limit (their
    sample is the limit, so the median is then a lower bound)."""

    samples: tuple[float, ...]
    stopped: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def lower_bound(self) -> bool:
        """True when a stopped run affects the median (the true median is at least this)."""
        return self.stopped > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_s": self.median,
            "min_s": self.min,
            "max_s": self.max,
            "repeats": self.n,
            "stopped_at_limit": self.stopped,
            "samples_s": list(self.samples),
        }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def time_repeats(fn: Callable[[int], Any], repeats: int) -> tuple[Timing, list[Any]]:
    """Call fn(i) for i in range(repeats), timing each call separately."""
    samples, results = [], []
    for i in range(repeats):
        seconds, out = timed(lambda: fn(i))
        samples.append(seconds)
        results.append(out)
    return Timing(tuple(samples)), results


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation, as numpy's default."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far.

    Linux: VmHWM of /proc/self/status, the high-water mark of this process's own address
    space. (`getrusage(...).ru_maxrss` survives fork + exec on Linux, so a child started by a
    big parent would report the parent's peak.) Elsewhere: ru_maxrss (KiB on Linux/BSD,
    bytes on macOS)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as fh:
            for line in fh:
                m = re.match(r"VmHWM:\s+(\d+)\s+kB", line)
                if m:
                    return int(m.group(1)) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (other processes competing for the cores)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                m = re.match(r"MemTotal:\s+(\d+)\s+kB", line)
                if m:
                    return int(m.group(1)) * 1024
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def code_version() -> str | None:
    """The git commit of the pcor_sql checkout being measured ('+ local changes' when pcor_sql/
    or benchmarks/ differs from it), or None outside a git checkout (e.g. an installed wheel)."""
    import subprocess

    import pcor_sql

    root = Path(pcor_sql.__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "pcor_sql", "benchmarks"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + (" + local changes" if dirty else "")


def machine() -> dict[str, Any]:
    """What the figures were measured on: platform, CPU, cores, memory and library versions."""
    mem = _mem_total_bytes()
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": _usable_cpus(),
        "mem_total_gib": round(mem / 2**30, 1) if mem else None,
        "python": platform.python_version(),
        "code": code_version(),
        "versions": {
            name: _version(name)
            for name in ("pcor-sql", "duckdb", "numpy", "scipy", "scikit-learn", "pyarrow")
        },
    }


def machine_line(info: dict[str, Any]) -> str:
    """One human line: 'Linux-… · Intel … · 2 cores · 23.4 GiB · Python 3.11.7 · duckdb 2.0.0 …'."""
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    cores = f"{info['cpu_count']} cores"
    if info.get("usable_cpus") and info["usable_cpus"] != info["cpu_count"]:
        cores += f" ({info['usable_cpus']} usable)"
    mem = f"{info['mem_total_gib']} GiB RAM" if info.get("mem_total_gib") else "RAM unknown"
    return f"{info['platform']} · {info['cpu']} · {cores} · {mem} · Python {info['python']} · {versions}"
