#!/usr/bin/env python3
"""After `make test` in CI: fail when something CI must cover was left out or skipped.

CI must build every backend the platform can build (Debian's packages give LibTorch, oneDNN and
MPI; a CUDA toolkit, where one is installed, the CUDA backend), with ONNX, YAML recipes, SQLite and
the Python package, and
must run every test: a test skipped for any reason but the ones listed in .ci/allowed-skips
(there is no GPU in CI, for one) means a prerequisite went missing, and the run fails naming it.

Usage: check-ci-coverage.py BUILD_DIR [--info FILE] [--log FILE] [--allowed FILE] [--nvcc PATH]
(--nvcc names the CUDA compiler, or a missing path for none; by default the machine has a CUDA
platform when nvcc and cuDNN's header are both there.)
(--info/--log replace what BUILD_DIR's d5 and ctest produced; the tests use them.)
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

REQUIRED_LIBRARIES = {
    "onnx": "ONNX import/export (Debian libonnx-dev)",
    "yaml-cpp": "YAML recipes (Debian libyaml-cpp-dev)",
    "mpi": "the MPI schemes of Level 3 (Debian libopenmpi-dev)",
    "sqlite": "the result history, d5 db (Debian libsqlite3-dev)",
    "sentencepiece": "the tokenizer of the text datasets (Debian libsentencepiece-dev)",
}

# Tests whose absence from the run means an area was left out of the build.
REQUIRED_TESTS = {
    "python_package": "the Python package deep500 (Debian pybind11-dev, python3-dev, python3-pytest)",
    "python_package_full_build": "the Python package's ONNX and oneDNN tests",
    "python_package_install": "the Python package's pip install (Debian python3-venv, python3-pip)",
}


def tests_run(log_text):
    """The names of the tests in ctest's LastTest.log."""
    return {m.group(1).strip() for m in re.finditer(r"^\d+/\d+ Testing: (.*)$", log_text, flags=re.M)}


def skipped_tests(log_text):
    """(test, reason) for every skip in ctest's LastTest.log: a test ctest marked skipped, a gtest
    skip inside a test that ran as a whole binary, and a pytest skip (its -rs summary line). A
    whole binary's skips are read from its companion, <test>_skips, where it has one
    (tests/CMakeLists.txt), so that each counts once."""
    out = []
    sections = re.split(r"^\d+/\d+ Testing: ", log_text, flags=re.M)[1:]
    names = {section.split("\n", 1)[0].strip() for section in sections}
    for section in sections:
        name = section.split("\n", 1)[0].strip()
        if name + "_skips" in names:
            continue
        body = section.split("<end of output>", 1)[0]
        lines = body.split("\n")
        reasons = []
        for i, line in enumerate(lines):
            pytest_skip = re.match(r"SKIPPED \[\d+\] \S+?:\d+: (.*)$", line)  # pytest -rs
            if pytest_skip:
                reasons.append(pytest_skip.group(1).strip())
            # A shell test's skip (exit 77, SKIP_RETURN_CODE): ctest's log then says "Test Passed.",
            # so the script's own "SKIPPED: reason" line is what shows it here.
            shell_skip = re.match(r"SKIPPED: (.*)$", line)
            if shell_skip:
                reasons.append(shell_skip.group(1).strip())
            if re.search(r": Skipped$", line):
                reason = []
                for nxt in lines[i + 1:]:
                    if nxt.startswith("[  SKIPPED ]") or nxt.startswith("[       OK ]") or nxt.startswith("["):
                        break
                    reason.append(nxt.strip())
                reasons.append(" ".join(r for r in reason if r) or "(no reason given)")
        tail = section.split("<end of output>", 1)[1] if "<end of output>" in section else ""
        ctest_skipped = re.search(r"Skip regular expression found|Test Skipped|Skipped by", tail) is not None
        if reasons:
            out.extend((name, r) for r in reasons)
        elif ctest_skipped:
            out.append((name, "(skipped without a gtest reason)"))
    return out


def cuda_platform():
    """Whether this machine can build the CUDA backend: nvcc and cuDNN's header (CMake needs both)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    headers = glob.glob("/usr/local/cuda*/include/cudnn.h") + glob.glob("/usr/include/cudnn.h") + glob.glob(
        "/usr/include/*/cudnn.h")
    return os.path.exists(nvcc) and bool(headers)


def load_allowed(path):
    allowed = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                allowed.append(re.compile(line))
    return allowed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--info")
    ap.add_argument("--log")
    ap.add_argument("--allowed", default=os.path.join(os.path.dirname(__file__), "..", ".ci", "allowed-skips"))
    ap.add_argument("--nvcc", help="the CUDA compiler (default: found with cuDNN's header, or none)")
    a = ap.parse_args()

    problems = []
    if a.info:
        info = json.load(open(a.info))
    else:
        d5 = os.path.join(a.build_dir, "bin", "d5")
        info = json.loads(subprocess.run([d5, "info", "--format", "json"], check=True, capture_output=True,
                                         text=True).stdout)
    have_toolkit = os.path.exists(a.nvcc) if a.nvcc else cuda_platform()
    for name in info.get("backends_not_built", []):
        if name == "cuda" and not have_toolkit:
            continue  # no CUDA toolkit on this platform: the backend cannot be built here
        problems.append(f"backend '{name}' was not built (its dependency was missing at configure time; "
                        "scripts/install-deps.sh installs it)")
    libraries = info.get("libraries", {})
    names = set(libraries) if isinstance(libraries, dict) else {x.get("name") for x in libraries}
    for lib, what in REQUIRED_LIBRARIES.items():
        if lib not in names:
            problems.append(f"{what} was not built in: no '{lib}' among the libraries of d5 info")

    log_path = a.log or os.path.join(a.build_dir, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(log_path):
        problems.append(f"no ctest log at {log_path}: run the tests first")
        skips = []
    else:
        log_text = open(log_path, errors="replace").read()
        skips = skipped_tests(log_text)
        ran = tests_run(log_text)
        for test, what in REQUIRED_TESTS.items():
            if test not in ran:
                problems.append(f"{what} was not tested: no test '{test}' ran (not built at configure time?)")
    allowed = load_allowed(a.allowed)
    ok_skips = 0
    for test, reason in skips:
        if any(p.search(reason) for p in allowed):
            ok_skips += 1
        else:
            problems.append(f"skipped in CI: {test}: {reason}")

    if problems:
        print(f"check-ci-coverage: {len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"check-ci-coverage: every backend and area built; {len(skips)} skip(s), all allowed in CI ({ok_skips})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
