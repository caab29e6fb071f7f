"""One BLAS thread per BLAS library in the processes the package starts: NumPy and SciPy
each carry their own OpenBLAS, and a limit set before SciPy is loaded reaches only
NumPy's (SciPy's then ran 2 threads beside it, spinning on the same cores)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_dashboard_process_runs_every_blas_on_one_thread():
    # as `panel serve app/main.py` runs it: the file as a script, before the app package
    code = ("import runpy, json; runpy.run_path('app/main.py'); "
            "from threadpoolctl import threadpool_info; "
            "print(json.dumps([(i['filepath'], i['num_threads']) for i in threadpool_info()"
            " if i['user_api'] == 'blas']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    pools = json.loads(out.strip().splitlines()[-1])
    assert len(pools) >= 2, pools  # NumPy's and SciPy's
    assert all(threads == 1 for _, threads in pools), pools


def test_the_command_line_runs_every_blas_on_one_thread():
    code = ("import runpy, sys, json, io, contextlib\n"
            "sys.argv = ['dynamics', 'run', '--t-end', '0.02']\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        runpy.run_module('dynamics', run_name='__main__')\n"
            "    except SystemExit:\n"
            "        pass\n"
            "from threadpoolctl import threadpool_info\n"
            "print(json.dumps([(i['filepath'], i['num_threads']) for i in threadpool_info()"
            " if i['user_api'] == 'blas']))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    pools = json.loads(out.strip().splitlines()[-1])
    assert len(pools) >= 2, pools
    assert all(threads == 1 for _, threads in pools), pools
