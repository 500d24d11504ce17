"""The listings of docs/python.md run as they are printed there."""
import pathlib
import re

import pytest

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
LISTING = re.compile(r"<!-- listing: ([\w-]+) -->\n```python\n(.*?)```", re.S)


# Listings that use oneDNN or ONNX by name, run where the build has them.
FULL_BUILD = {"operators", "network-from-pytorch"}


def listings():
    found = LISTING.findall(PAGE.read_text())
    assert len(found) >= 5, f"{PAGE} lost its listings"
    return [pytest.param(name, code, id=name, marks=[pytest.mark.full_build] if name in FULL_BUILD else [])
            for name, code in found]


@pytest.mark.parametrize("name,code", listings())
def test_listing_runs(name, code):
    exec(compile(code, f"{PAGE.name}:{name}", "exec"), {"__name__": f"listing_{name}"})
