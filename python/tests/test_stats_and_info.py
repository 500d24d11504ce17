"""d5.stats against hand-computed values and published tables; d5.info; d5.load_results."""
import json
import pathlib
import subprocess

import pytest

import deep500 as d5


@pytest.mark.parametrize("n,lower,upper,level", [
    (6, 1, 6, 0.96875),     # 1 - 2 / 2^6
    (10, 2, 9, 0.978515625),  # Le Boudec, Table A.1: n = 10 -> ranks 2 and 9
    (20, 6, 15, 0.958610535),
])
def test_median_ci_ranks_are_the_binomial_order_statistics(n, lower, upper, level):
    samples = [float(10 * i) for i in range(n, 0, -1)]  # unsorted on purpose
    ci = d5.stats.median_ci(samples)
    assert ci["available"]
    assert (ci["lower_rank"], ci["upper_rank"]) == (lower, upper)
    assert (ci["lower"], ci["upper"]) == (10.0 * lower, 10.0 * upper)
    assert ci["achieved_level"] == pytest.approx(level, abs=1e-9)


def test_median_ci_says_why_five_samples_are_too_few():
    ci = d5.stats.median_ci([1, 2, 3, 4, 5])
    assert not ci["available"] and ci["lower"] is None and "6" in ci["reason"]


def test_mann_whitney_exact_p_by_hand():
    # a entirely below b: U_a = 0, and P(U <= 0) = 1 / C(6, 3) = 1/20 on each side.
    r = d5.stats.mann_whitney([1, 2, 3], [4, 5, 6])
    assert r["exact"] and r["u_x"] == 0 and r["u_y"] == 9
    assert r["p_value"] == pytest.approx(0.1)
    with pytest.raises(d5.InvalidArgument):
        d5.stats.mann_whitney([], [1.0])


def test_summarize_reports_the_median_and_its_ci():
    s = d5.stats.summarize([3, 1, 2, 5, 4, 6, 7])
    assert s["n"] == 7 and s["median"] == 4 and s["min"] == 1 and s["max"] == 7


def test_info_is_the_manifest_of_this_build():
    info = d5.info()
    assert "reference" in [b["name"] if isinstance(b, dict) else b for b in info["backends"]]
    assert d5.__version__ and isinstance(d5.__version__, str)


def test_load_results_reads_what_d5_wrote_and_refuses_what_it_did_not(tmp_path, d5_binary):
    out = tmp_path / "r.json"
    subprocess.run([str(d5_binary), "serve-bench", "mlp", "--backend", "reference", "--scenario", "single-stream",
                    "--min-duration", "0.05", "--format", "json", "-o", str(out)], check=True,
                   capture_output=True)
    r = d5.load_results(out)
    assert r["cases"][0]["backend"] == "reference"
    assert r["manifest"] == json.loads(out.read_text())["manifest"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something else"}')
    with pytest.raises(d5.FormatError):
        d5.load_results(bad)
    with pytest.raises(d5.IoError):
        d5.load_results(tmp_path / "missing.json")


RECIPE = (pathlib.Path(__file__).parent / "data" / "tiny-recipe.yaml").read_text()


def test_run_recipe_runs_d5_run_and_returns_its_result(tmp_path, d5_binary):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(RECIPE)
    r = d5.run_recipe(recipe, results_dir=tmp_path / "out", max_time=0.2)
    assert r["passed"] is True
    (run,) = r["cases"]
    assert run["extra"]["entry"] == "gemm" and "--max-time" in run["extra"]["args"]
    assert run["extra"]["args"][run["extra"]["args"].index("--max-time") + 1] == "0.2"  # the override
    assert (tmp_path / "out").is_dir() and any((tmp_path / "out").iterdir())
    with pytest.raises(d5.Error, match="d5 run .* failed"):
        d5.run_recipe(tmp_path / "missing.yaml")


def test_d5_command_without_a_d5_binary_is_an_io_error_not_a_loop(monkeypatch, capsys, tmp_path):
    # The environment's `d5` entry point never runs d5 from PATH (that is itself); with no package
    # binary and no build binary it ends like d5's own I/O errors. Its success is in check_pip_install.sh.
    from deep500 import _paths, cli
    monkeypatch.delenv("D5_BINARY", raising=False)
    monkeypatch.setattr(_paths, "D5_EXECUTABLE", str(tmp_path / "no-d5"))
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "d5").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "d5").chmod(0o755)
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 4
    assert "no d5 executable" in capsys.readouterr().err
    assert d5.recipes.d5_executable() == str(tmp_path / "d5")  # run_recipe itself may use PATH's
