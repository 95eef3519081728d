"""The README's shell commands work: each command of its ```bash (```sh, ```shell, ```console)
blocks is either run here (the cheap ones, with a timeout, checking the exit status and what it
prints) or mapped, in COVERED_BY below, to the test function or `.ci/run` line that runs it; a
mapping is checked against that function's source (or that line). A command in the README that
is neither run nor mapped fails `test_every_readme_command_is_run_or_mapped`, and so does an
entry of the tables below that the README no longer has.

Also: the README stays short (at most 400 lines), the benches of its results table exist and
take the flags it gives them, and every relative link of README.md and docs/*.md reaches a file
(and, with `#anchor`, a heading of it)."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
MAX_README_LINES = 400
SHELL_FENCES = {"bash", "sh", "shell", "console"}
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
       "MKL_NUM_THREADS": "1", "FLEXFLOW_PROGRESS": "off"}


@dataclass(frozen=True)
class Run:
    """Run by this test: from the repository root, or (`in_tmp`) from an empty folder, as the
    README's user runs it; its output must match each of `expect`. `argv` replaces the command
    where running it as written would not fit a test (said in `why`)."""
    expect: tuple[str, ...]
    in_tmp: bool = False
    needs: tuple[str, ...] = ()   # modules without which the command cannot run (then: skip)
    argv: tuple[str, ...] | None = None
    why: str = ""


# command (as the README writes it, quotes removed) -> how this test runs it
RUN_HERE = {
    "python -m flexflow --help": Run(expect=(r"usage: flexflow_python", r"--budget")),
    "flexflow strategy show docs/alexnet-2x2.txt": Run(
        expect=(r"degrees \(batch first\)", r"^Conv2D_100\s+4 x 1 x 1 x 1\s+4\s+0-3$")),
    "python examples/pytorch/mnist_mlp_torch.py": Run(
        expect=(r"wrote mlp\.ff and mlp\.ff\.npz",), in_tmp=True, needs=("torch",)),
    "python examples/onnx/mnist_mlp_pt.py": Run(
        expect=(r"wrote mnist_mlp_pt\.onnx",), in_tmp=True, needs=("torch", "onnx")),
    "bash .ci/run": Run(expect=(), argv=("bash", "-n", ".ci/run"),
                        why="it runs the whole suite; here: its syntax (bash -n), and "
                            "test_ci_run_ends_with_the_readme_s_test_command"),
}

# command -> [(where it runs: "tests/<file>.py::<function>" or ".ci/run", the parts of the
# command that source must hold)]. Each part is a piece of the README command; in a function it
# must be one of the function's string literals (or, 4 characters or more, inside one), its
# decorators included; in .ci/run every part must be on one line. Placeholders (HOST, train.py,
# <...>) stand for what the mapped test fills in.
COVERED_BY = {
    "pip install -e .": [(".ci/run", ("pip install", "-e"))],
    "python examples/native/mnist_mlp.py -e 1": [
        # on real MNIST, with -a (>= 90% accuracy); about a minute of 2 cores, so not run here
        ("tests/examples/test_mnist_accuracy.py::test_mlp_reaches_90_percent_in_one_epoch",
         ("mnist_mlp.py", "-e", "1"))],
    # .ci/run installs torch first, then the package and its extras, as the README says to
    "pip install torch --index-url <PyTorch's CPU wheel index>": [
        (".ci/run", ("pip install", "torch"))],
    "pip install -e .[torch]": [(".ci/run", ("pip install", "-e"))],
    "flexflow_python examples/native/mnist_mlp.py -ll:py 1 -ll:gpu 2 -ll:fsize 3048 "
    "-ll:zsize 12192 -b 128": [
        ("tests/launcher/test_ci_command_lines.py::test_multi_gpu_tests_line_with_two_devices",
         ("mnist_mlp.py", "-ll:py", "1", "-ll:gpu", "2", "-ll:fsize", "3048", "-ll:zsize",
          "12192", "-b"))],
    "dask scheduler": [("tests/parallel/cluster.py::_command", ("dask",)),
                       ("tests/parallel/cluster.py::loopback_cluster", ("scheduler",))],
    "dask worker tcp://HOST:8786 --nworkers 4 --nthreads 1": [
        ("tests/parallel/cluster.py::_command", ("dask",)),
        ("tests/parallel/cluster.py::loopback_cluster",
         ("worker", "--nworkers", "--nthreads", "1"))],
    "flexflow_python train.py -ll:py 1 -ll:gpu 8 -ll:fsize 14000 -b 512 "
    "--scheduler tcp://HOST:8786": [
        ("tests/launcher/test_multinode.py::test_loopback_cluster_trains_like_the_in_process_run",
         ("-ll:py", "1", "-ll:gpu", "-b", "--scheduler"))],
    "flexflow_python train.py -ll:py 1 -ll:gpu 8 -b 512 --scheduler tls://HOST:8786 "
    "--tls-ca-file ca.pem --tls-cert node.pem --tls-key node-key.pem": [
        ("tests/parallel/test_tls.py::test_training_over_tls_gives_the_in_process_numbers",
         ("--scheduler", "-ll:gpu", "tls://")),
        ("tests/parallel/test_tls.py::tls_flags", ("--tls-ca-file", "--tls-cert", "--tls-key"))],
    "python examples/keras/seq_mnist_mlp.py -e 1": [
        ("tests/launcher/test_ci_command_lines.py::test_python_interface_test_line",
         ("seq_mnist_mlp.py", "-e", "1"))],
    "python examples/pytorch/mnist_mlp.py -e 1": [
        ("tests/torch/test_examples.py::test_file_route_examples",
         ("mnist_mlp.py", "-e", "1"))],
    "python examples/onnx/mnist_mlp.py -e 1": [
        ("tests/onnx/test_examples.py::test_exported_model_imports_and_trains",
         ("mnist_mlp", ".py", "-e", "1"))],
}


# ---------------------------------------------------------------- reading the README's commands

PLACEHOLDER = re.compile(r"<[^<>\n]+>")
FENCE = re.compile(r"^\s*```\s*([\w+-]*)")


def shell_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(fence language, lines) of every fenced block of a markdown text."""
    blocks, language, lines = [], None, []
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence and language is None:
            language, lines = fence.group(1).lower(), []
        elif fence and not fence.group(1):
            blocks.append((language, lines))
            language = None
        elif language is not None:
            lines.append(line)
    assert language is None, "a fenced block of README.md is never closed"
    return blocks


def commands_of(language: str, lines: list[str]) -> list[str]:
    """The commands of a shell block, one string each (tokens joined by single spaces, quotes
    removed, comments dropped, `\\` continuations joined, `&&`, `||`, `;` and `|` splitting)."""
    if language == "console":  # only prompts are commands; the rest is output
        lines = [line.split("$ ", 1)[1] for line in lines if line.lstrip().startswith("$ ")]
    logical, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
        else:
            logical.append(pending + line)
            pending = ""
    logical.append(pending)
    commands = []
    for line in logical:
        held = PLACEHOLDER.findall(line)  # "<PyTorch's CPU wheel index>" has a quote in it
        for i, text in enumerate(held):
            line = line.replace(text, f"PLACEHOLDER{i}X", 1)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if token in ("&&", "||", ";", "|", "&"):
                commands.append(current)
                current = []
            else:
                for i, text in enumerate(held):
                    token = token.replace(f"PLACEHOLDER{i}X", text)
                current.append(token)
        commands.append(current)
    return [" ".join(command) for command in commands if command]


def readme_commands() -> list[str]:
    return [command for language, lines in shell_blocks(README.read_text())
            if language in SHELL_FENCES for command in commands_of(language, lines)]


# ------------------------------------------------------------------- the README's own commands

def test_the_readme_has_at_most_400_lines():
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, (f"README.md has {lines} lines; move detail to docs/ "
                                       f"(at most {MAX_README_LINES})")


def test_the_readme_has_the_quick_start_commands():
    commands = readme_commands()
    assert "pip install -e ." in commands and "bash .ci/run" in commands
    assert "python examples/native/mnist_mlp.py -e 1" in commands


def test_every_readme_command_is_run_or_mapped():
    commands = readme_commands()
    both = sorted(set(RUN_HERE) & set(COVERED_BY))
    assert not both, f"run here and mapped too (pick one): {both}"
    uncovered = [c for c in commands if c not in RUN_HERE and c not in COVERED_BY]
    assert not uncovered, ("README commands neither run by tests/test_readme_commands.py nor "
                           "mapped to a test in its COVERED_BY:\n  " + "\n  ".join(uncovered))
    stale = sorted((set(RUN_HERE) | set(COVERED_BY)) - set(commands))
    assert not stale, "entries for commands the README no longer has:\n  " + "\n  ".join(stale)


@pytest.mark.parametrize("command", sorted(RUN_HERE))
def test_readme_command_runs(command, tmp_path):
    run = RUN_HERE[command]
    for module in run.needs:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"`{command}` needs {module}, not installed")
    argv = list(run.argv) if run.argv else shlex.split(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    elif argv[0] in ("flexflow", "flexflow_python"):
        beside = Path(sys.executable).parent / argv[0]
        argv[0] = str(beside) if beside.exists() else (shutil.which(argv[0]) or argv[0])
    cwd = tmp_path if run.in_tmp else ROOT
    if run.in_tmp:  # the repository's paths, as the README's user (in the root) gives them
        argv = [str(ROOT / a) if (ROOT / a).exists() and not Path(a).is_absolute() else a
                for a in argv]
    result = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True,
                            timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"`{command}` exited with {result.returncode}:\n{output[-3000:]}"
    for pattern in run.expect:
        assert re.search(pattern, output, re.MULTILINE), f"`{command}` printed no {pattern!r}:\n" \
                                                         f"{output[-3000:]}"


def test_ci_run_ends_with_the_readme_s_test_command():
    """The README: "its test command is `python -m pytest -q tests`"."""
    said = re.search(r"its test command is `([^`]+)`", README.read_text())
    assert said, "the README no longer names .ci/run's test command"
    last = [line for line in CI_RUN.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")][-1]
    ours = shlex.split(last)
    assert set(shlex.split(said.group(1))) <= set(ours), (said.group(1), last)


def _function_source(module_path: Path, name: str) -> ast.AST:
    tree = ast.parse(module_path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"{module_path.relative_to(ROOT)} has no function {name}")


def _string_literals(node: ast.AST) -> set[str]:
    """Every string constant in a function, its decorators included (f-strings: their parts)."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


MAPPINGS = [(command, target, parts) for command, targets in COVERED_BY.items()
            for target, parts in targets]


@pytest.mark.parametrize("command, target, parts", MAPPINGS,
                         ids=[f"{c[:40]}->{t.rsplit('::', 1)[-1]}" for c, t, _ in MAPPINGS])
def test_mapped_command_is_in_its_test(command, target, parts):
    missing = [part for part in parts if part not in command]
    assert not missing, f"{missing} are not parts of the README command `{command}`"
    if target == ".ci/run":
        lines = [line for line in CI_RUN.read_text().splitlines()
                 if not line.lstrip().startswith("#") and all(p in line for p in parts)]
        assert lines, f".ci/run has no line with all of {parts} (for `{command}`)"
        return
    path, name = target.split("::")
    function = _function_source(ROOT / path, name)
    literals = _string_literals(function)
    absent = [part for part in parts if part not in literals
              and not (len(part) >= 4 and any(part in text for text in literals))]
    assert not absent, f"{target} does not hold {absent} of `{command}`"
    if name.startswith("test_"):
        assert (ROOT / path).name.startswith("test_"), f"{path} is not collected by pytest"


def test_extras_the_readme_installs_exist():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    named = [e for c in readme_commands() for group in re.findall(r"\.\[([\w,-]+)\]", c)
             for e in group.split(",")]
    named += re.findall(r'pip install -e "\.\[([\w-]+)\]"', README.read_text())
    assert named and not set(named) - set(extras), (sorted(set(named) - set(extras)), extras)


# ------------------------------------------------------------ the benches of the results table

def results_table_commands() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Results against PyTorch"):]
    section = section[:section.index("\n## ", 1)]
    return sorted({cell for row in section.splitlines() if row.startswith("|")
                   for cell in re.findall(r"`(python bench/[^`]+)`", row)})


def test_every_result_row_names_a_bench_command():
    text = README.read_text()
    section = text[text.index("## Results against PyTorch"):]
    section = section[:section.index("\n## ", 1)]
    rows = [r for r in section.splitlines() if r.startswith("|") and not r.startswith("|---")]
    assert len(rows) > 2, "the results table is gone"
    for row in rows[1:]:  # the header aside
        assert re.search(r"`python bench/\S+\.py[^`]*`", row), f"a row without its command: {row}"


@pytest.mark.parametrize("command", results_table_commands())
def test_result_bench_exists_and_takes_its_flags(command):
    argv = shlex.split(command)
    script = ROOT / argv[1]
    assert script.is_file(), f"{argv[1]} does not exist"
    flags = [a for a in argv[2:] if a.startswith("--")]
    if not flags:
        return
    result = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    unknown = [flag for flag in flags if flag not in result.stdout]
    assert not unknown, f"{argv[1]} --help lists no {unknown}"


# ----------------------------------------------------------------- links of README.md and docs/

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code (where brackets are code, not links)."""
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    seen: dict[str, int] = {}
    result = set()
    for line in _prose_headings(path.read_text()):
        slug = re.sub(r"[^\w\- ]", "", line.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def _prose_headings(text: str) -> list[str]:
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.MULTILINE | re.DOTALL)
    return [m.group(1) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.MULTILINE)]


DOC_FILES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOC_FILES, ids=[str(p.relative_to(ROOT)) for p in DOC_FILES])
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(_prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and anchor not in anchors(file):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{doc.relative_to(ROOT)}: " + ", ".join(broken)
