"""Command line ``python -m dynamics run`` (subprocess and in-process ``main``)."""

import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from dynamics.cli import main

COLUMNS = ("t", "free_energy", "potential", "hamiltonian", "kinetic_energy",
           "dissipation_rate", "dissipated", "work", "kl", "kl_bound", "energy_residual",
           "entropy_mean", "min_attention", "row_sum_error", "feature_norm")
FAST = ["--n-tokens", "3", "--dim", "2", "--dt", "0.02", "--t-end", "0.2"]


def run_module(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dynamics", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_subprocess_csv_on_stdout_has_documented_columns():
    proc = run_module("run", "--model", "attention", "--path", "rotation", *FAST)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(io.StringIO(proc.stdout))
    for column in COLUMNS:
        assert column in df.columns, column
    assert len(df) == 11
    np.testing.assert_allclose(df["t"], np.linspace(0, 0.2, 11), atol=1e-12)
    assert np.all(df["row_sum_error"] <= 1e-12) and np.all(df["min_attention"] > 0)
    assert np.all(df["kl"] <= df["kl_bound"] * (1 + 1e-9) + 1e-14)


def test_subprocess_bad_value_exits_2_naming_the_range():
    proc = run_module("run", "--beta", "0", *FAST)
    assert proc.returncode == 2
    assert "beta" in proc.stderr and "[0.001, 1000]" in proc.stderr
    assert proc.stdout == ""


def test_subprocess_summary_json(tmp_path):
    proc = run_module("run", "--model", "canonical", "--summary", *FAST)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "completed"
    assert summary["t_final"] == pytest.approx(0.2)
    assert summary["diverged_at"] is None
    assert summary["model"] == "canonical"


def test_main_summary_reports_divergence(capsys):
    code = main(["run", "--model", "canonical", "--confinement", "0", "--beta", "2",
                 "--n-tokens", "6", "--dim", "4", "--norm-limit", "10",
                 "--init-momentum", "random", "--dt", "0.02", "--t-end", "50", "--every",
                 "10", "--summary"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "diverged"
    assert 0 < summary["diverged_at"] < 50
    assert summary["t_final"] <= summary["diverged_at"]
    assert "diverged at t =" in summary["message"]
    assert all(v is None or math.isfinite(v) for v in summary["final"].values())


@pytest.mark.parametrize("argv, words", [
    (["run", "--no-such-flag", "1"], ["unrecognized", "--no-such-flag"]),
    (["run", "--n-tokens", "1"], ["n_tokens", "[2, 1024]"]),
    (["run", "--dt", "2"], ["dt", "1"]),
    (["run", "--gamma", "nan"], ["gamma"]),
    (["run", "--beta", "abc"], ["--beta", "invalid"]),
    (["run", "--model", "nope"], ["--model", "invalid choice"]),
    (["run", "--t-end", "-1"], ["t_end"]),
    (["run", "--every", "0"], ["every"]),
    ([], ["command"]),
])
def test_main_bad_input_exits_2_with_message(argv, words, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, (word, err)


def test_main_writes_csv_file(tmp_path, capsys):
    out = tmp_path / "run.csv"
    assert main(["run", "--model", "value_matching", *FAST, "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    df = pd.read_csv(out)
    assert tuple(COLUMNS) == tuple(c for c in df.columns if c in COLUMNS)
    # value matching has no tracking bound: the column is present but empty (NaN)
    assert df["kl_bound"].isna().all()
    assert [p.name for p in tmp_path.iterdir()] == ["run.csv"]


def test_main_writes_netcdf_readable_by_xarray(tmp_path):
    import xarray as xr

    out = tmp_path / "run.nc"
    assert main(["run", "--model", "canonical", *FAST, "--out", str(out)]) == 0
    with xr.open_dataset(out, engine="scipy") as ds:
        assert ds.sizes["time"] == 11
        assert ds["features"].shape == (11, 3, 2)
        assert ds["attention"].shape == (11, 3, 3)
        for column in COLUMNS[1:]:
            assert column in ds.data_vars, column
        A = ds["attention"].values
        np.testing.assert_allclose(A.sum(axis=2), 1.0, atol=1e-12)
        np.testing.assert_allclose(ds["time"].values, np.linspace(0, 0.2, 11), atol=1e-12)


def test_missing_output_folder_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "missing" / "run.csv"
    with pytest.raises(SystemExit) as info:
        main(["run", *FAST, "--out", str(out)])
    assert info.value.code != 0
    err = capsys.readouterr().err
    assert "--out" in err and "not writable" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_unwritable_output_leaves_no_partial_file(tmp_path, capsys):
    """--out naming a directory: the write fails cleanly, nothing is left behind."""
    target = tmp_path / "taken"
    target.mkdir()
    code = main(["run", *FAST, "--out", str(target)])
    assert code != 0
    err = capsys.readouterr().err
    assert "cannot write --out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert list(target.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(SystemExit) as info:
            main(["run", *FAST, "--out", str(folder / "x.csv")])
        assert info.value.code == 2
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)
