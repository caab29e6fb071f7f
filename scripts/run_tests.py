"""Run the whole test suite: the browser tier and the fast tier side by side.

    python scripts/run_tests.py [PYTEST ARGS...]

The browser tier (marker ``ui``) spends most of its time waiting on the page (runs
streaming to their end, sessions expiring): alone it keeps two cores about a third busy.
The fast tier (everything else) is numerics that keep every core busy. So both run at
once, each as its own ``pytest`` in ``-n 2`` processes (pytest-xdist), and the fast tier
at a lower priority (``nice``): whenever the browser tier wants the CPU (a page drawing,
a frame sent) it gets it first, as it would alone, and the fast tier uses what is left.

Each tier's output is printed line by line with its name in front (``[fast]``,
``[browser]``); the exit status is non-zero when either tier fails. Extra arguments go
to both ``pytest`` commands (say ``-x`` or ``-k name``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

#: The two tiers: name, marker expression, processes, niceness.
TIERS = (("browser", "ui", 2, 0), ("fast", "not ui", 2, 10))


def _pipe(name: str, stream, lock: threading.Lock) -> None:
    for line in iter(stream.readline, ""):
        with lock:
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()


def main(argv: list[str]) -> int:
    lock = threading.Lock()
    started = time.monotonic()
    runs = []
    for name, marks, procs, niceness in TIERS:
        command = [sys.executable, "-m", "pytest", "-m", marks, "-n", str(procs), *argv]
        if niceness:
            command = ["nice", "-n", str(niceness), *command]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        reader = threading.Thread(target=_pipe, args=(name, proc.stdout, lock), daemon=True)
        reader.start()
        runs.append((name, proc, reader))
    codes = {}
    while len(codes) < len(runs):  # each tier's end reported as it comes
        for name, proc, reader in runs:
            if name not in codes and proc.poll() is not None:
                codes[name] = proc.returncode
                reader.join()
                with lock:
                    print(f"[{name}] exit {codes[name]} after "
                          f"{time.monotonic() - started:.0f} s", flush=True)
        time.sleep(0.5)
    failed = [name for name, code in codes.items() if code != 0]
    print(f"whole suite: {'FAILED (' + ', '.join(failed) + ')' if failed else 'passed'} "
          f"in {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
