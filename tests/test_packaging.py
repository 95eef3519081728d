"""What `pip install` gets: the license pyproject.toml names, the extras, bounds on the Dask
versions whose internals the code uses, and a `[gpu]` extra that resolves to a dask-cuda, dask
and distributed that work together (asked of the package index with `pip install --dry-run`;
skipped where no index can be reached)."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
UNREACHABLE = ("Network is unreachable", "Failed to establish a new connection",
               "Temporary failure in name resolution", "No matching distribution found for "
               "setuptools", "Could not fetch URL")


def test_the_license_file_is_the_one_pyproject_names():
    assert PROJECT["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_viz_extra_brings_what_the_dashboard_and_the_pictures_need():
    extras = PROJECT["optional-dependencies"]
    assert {re.split(r"[<>=]", r)[0] for r in extras["viz"]} == {"bokeh", "matplotlib"}
    assert "viz" in extras["all"][0]


def test_dask_and_distributed_are_bounded_above():
    bounds = {re.split(r"[<>=,]", r)[0]: r for r in PROJECT["dependencies"]}
    assert "<" in bounds["dask"] and "<" in bounds["distributed"]


def test_the_gpu_extra_resolves_to_packages_that_work_together(tmp_path):
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), f"{ROOT}[gpu]"], capture_output=True, text=True, timeout=600)
    if result.returncode and any(text in result.stderr for text in UNREACHABLE):
        pytest.skip("no package index can be reached")
    assert result.returncode == 0, result.stderr[-3000:]
    versions = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}
    assert versions["dask"] == versions["distributed"]
    assert int(versions["dask-cuda"].split(".")[0]) >= 26  # imports with today's dask
    assert "rapids-dask-dependency" in versions  # dask-cuda's pin on dask, which pip kept
    assert "cupy-cuda13x" in versions and "torch" in versions
