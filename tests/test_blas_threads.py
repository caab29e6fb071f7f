"""One BLAS thread per BLAS library in the processes the package starts: NumPy and SciPy
each carry their own OpenBLAS, and a limit set before SciPy is loaded reaches only
NumPy's (SciPy's then ran 2 threads beside it, spinning on the same cores)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Printed last by each subprocess: the BLAS pools it has loaded, with their threads.
REPORT = ("from threadpoolctl import threadpool_info\n"
          "print(json.dumps([(i['filepath'], i['num_threads']) for i in threadpool_info()"
          " if i['user_api'] == 'blas']))\n")


def _pools(code):
    out = subprocess.run([sys.executable, "-c", "import json\n" + code + REPORT], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_dashboard_process_runs_every_blas_on_one_thread():
    # as `panel serve app/main.py` runs it: the file as a script, before the app package
    pools = _pools("import runpy\nrunpy.run_path('app/main.py')\n")
    assert len(pools) >= 2, pools  # NumPy's and SciPy's
    assert all(threads == 1 for _, threads in pools), pools


def test_the_command_line_runs_every_blas_on_one_thread():
    pools = _pools("import runpy, sys, io, contextlib\n"
                   "sys.argv = ['dynamics', 'run', '--t-end', '0.02']\n"
                   "with contextlib.redirect_stdout(io.StringIO()):\n"
                   "    try:\n"
                   "        runpy.run_module('dynamics', run_name='__main__')\n"
                   "    except SystemExit:\n"
                   "        pass\n")
    assert len(pools) >= 2, pools
    assert all(threads == 1 for _, threads in pools), pools
