"""The listings of docs/python.md run as they are printed there."""
import pathlib
import re

import pytest

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
LISTING = re.compile(r"<!-- listing: ([\w-]+) -->\n```python\n(.*?)```", re.S)


def listings():
    found = LISTING.findall(PAGE.read_text())
    assert len(found) >= 4, f"{PAGE} lost its listings"
    return found


@pytest.mark.parametrize("name,code", listings(), ids=[n for n, _ in listings()])
def test_listing_runs(name, code):
    exec(compile(code, f"{PAGE.name}:{name}", "exec"), {"__name__": f"listing_{name}"})
