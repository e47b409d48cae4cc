"""The CPU profile's summary (``omniroute.tools.bench.flame``) from py-spy's collapsed stacks:
inclusive counts a frame once per sample however often it recurs, self counts the innermost
frame, line numbers merge, and only the product's frames make the inclusive table."""

from __future__ import annotations

from omniroute.tools.bench.flame import is_product, parse, render

RAW = [
    "run (daphne/server.py:10);handle (routing/proxy/shell.py:40);"
    "send (routing/proxy/upstream/client.py:7) 6\n",
    "run (daphne/server.py:10);handle (routing/proxy/shell.py:41);"
    "scrub (omniroute/core/scrub.py:75) 3\n",
    "run (daphne/server.py:11);walk (routing/x.py:1);walk (routing/x.py:2) 1\n",
    "not a stack line\n",
    "run (daphne/server.py:12);load (omniroute/tools/loadgen.py:3) 2\n",
]


def test_counts_are_inclusive_once_per_sample_and_self_innermost() -> None:
    profile = parse(RAW)

    assert profile.samples == 12
    assert profile.inclusive["run (daphne/server.py)"] == 12
    assert profile.inclusive["handle (routing/proxy/shell.py)"] == 9  # two lines, one function
    assert profile.inclusive["walk (routing/x.py)"] == 1  # recursion counts once
    assert profile.own["send (routing/proxy/upstream/client.py)"] == 6
    assert profile.own["walk (routing/x.py)"] == 1
    assert "run (daphne/server.py)" not in profile.own


def test_the_product_is_the_apps_and_the_project_less_its_tools() -> None:
    assert is_product("scrub (omniroute/core/scrub.py)")
    assert is_product("handle (routing/proxy/shell.py)")
    assert not is_product("run (daphne/server.py)")
    assert not is_product("load (omniroute/tools/loadgen.py)")


def test_render_lists_product_frames_inclusive_and_any_frame_self() -> None:
    text = render(parse(RAW))

    inclusive, own = text.split("Self, any code")
    assert "| 75.0 % | `handle (routing/proxy/shell.py)` |" in inclusive
    assert "daphne" not in inclusive and "loadgen" not in inclusive
    assert "| 50.0 % | `send (routing/proxy/upstream/client.py)` |" in own
    assert text.startswith("12 samples; the product's own code (self) 83.3 % of them.")
