"""Summarise `py-spy record --threads -f raw` output: samples per thread and the
functions with the most inclusive and self samples, per thread.

    /path/to/py-spy record --threads -r 200 -f raw -o /tmp/p.txt -- \
        .venv/bin/python -m benchmarks.bench_dispatch --child tuisched --n 10000
    .venv/bin/python -m benchmarks._pyspy_summary /tmp/p.txt [--top 25] [--thread MainThread]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

_THREAD = re.compile(r"^thread \((\w+)\)(?:: (.*))?$")
_IDLE = (
    "select (selectors.py",
    "wait (threading.py",
    "_worker (concurrent",
    "poll (selectors.py",
    "Condition.wait",
    "EpollSelector.select",
    "Event.wait",
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--thread", default="", help="only threads whose name contains this")
    args = parser.parse_args()
    per_thread: Counter[str] = Counter()
    inclusive: defaultdict[str, Counter[str]] = defaultdict(Counter)
    own: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for line in Path(args.path).read_text(encoding="utf-8").splitlines():
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        thread = "?"
        rest = frames
        for i, frame in enumerate(frames):
            m = _THREAD.match(frame)
            if m:
                name = m.group(2) or m.group(1)
                thread = "tuisched-job-*" if name.startswith("tuisched-job-") else name
                thread = "(unnamed)" if name.isdigit() else thread
                thread = "ThreadPoolExecutor-*" if name.startswith("ThreadPoolExecutor") else thread
                rest = frames[i + 1 :]
                break
        if args.thread and args.thread not in thread:
            continue
        per_thread[thread] += count
        for frame in set(rest):
            inclusive[thread][frame] += count
        if rest:
            own[thread][rest[-1]] += count
    total = sum(per_thread.values())
    print(f"{total} samples")
    for thread, count in per_thread.most_common():
        idle = sum(c for f, c in own[thread].items() if any(i in f for i in _IDLE))
        print(f"\n== thread {thread}: {count} samples ({idle} idle in select/wait)")
        print("  inclusive:")
        for frame, c in inclusive[thread].most_common(args.top):
            print(f"    {c:6d} {100 * c / count:5.1f}%  {frame}")
        print("  self:")
        for frame, c in own[thread].most_common(args.top // 2):
            print(f"    {c:6d} {100 * c / count:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
