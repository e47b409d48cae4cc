"""Capability and context-window filtering in planning (pure)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.domain.client.errors import GatewayError
from routing.domain.config.combo_options import DEFAULT_OPTIONS, ComboOptions
from routing.domain.config.snapshot import CatalogEntry, ConfigSnapshot
from routing.domain.plan.compatibility import Incompatibility, incompatibilities
from routing.domain.plan.needs import NO_NEEDS, RequestNeeds
from routing.domain.plan.planning import RoutePlan, plan_route
from tests.routing.resolution_support import (
    combo,
    conn,
    described,
    entry,
    key,
    provider,
    snapshot,
)

TOOLS = RequestNeeds(tools=True, input_tokens=10)
STRUCTURED = RequestNeeds(structured_output=True, input_tokens=10)
FAIL_OPEN = ComboOptions(compat_filter_fail_open=True)
T = Incompatibility


@pytest.mark.parametrize(
    ("catalog", "needs", "expected"),
    [
        (None, RequestNeeds(tools=True, structured_output=True, input_tokens=10**9), ()),
        (entry("a/m"), RequestNeeds(tools=True, structured_output=True, input_tokens=10**9), ()),
        (entry("a/m", tools=False), TOOLS, (T.TOOLS,)),
        (entry("a/m", tools=False), STRUCTURED, ()),
        (entry("a/m", tools=True), TOOLS, ()),
        (entry("a/m", structured=False), STRUCTURED, (T.STRUCTURED_OUTPUT,)),
        (entry("a/m", structured=False), TOOLS, ()),
        (entry("a/m", context=100), RequestNeeds(input_tokens=100), ()),  # exactly fits
        (entry("a/m", context=100), RequestNeeds(input_tokens=101), (T.CONTEXT_WINDOW,)),
        (entry("a/m", context=100), RequestNeeds(input_tokens=60, max_output_tokens=40), ()),
        (
            entry("a/m", context=100),
            RequestNeeds(input_tokens=60, max_output_tokens=41),
            (T.CONTEXT_WINDOW,),
        ),
        (
            entry("a/m", context=5, tools=False, structured=False),
            RequestNeeds(tools=True, structured_output=True, input_tokens=6),
            (T.TOOLS, T.STRUCTURED_OUTPUT, T.CONTEXT_WINDOW),
        ),
    ],
)
def test_incompatibilities(
    catalog: CatalogEntry | None, needs: RequestNeeds, expected: tuple[Incompatibility, ...]
) -> None:
    assert incompatibilities(catalog, needs) == expected


# acme 1 serves any model; the catalog knows four of acme's models.
CATALOG = (
    entry("acme/tiny", context=100),
    entry("acme/huge", context=100_000),
    entry("acme/plain", tools=False, structured=False),
    entry("acme/able", tools=True, structured=True),
)


def world(*targets: str, options: ComboOptions = DEFAULT_OPTIONS) -> ConfigSnapshot:
    team = combo("team", *targets, options=options)
    return snapshot([provider("acme")], [conn(1, "acme")], [team], CATALOG)


def plan(world: ConfigSnapshot, needs: RequestNeeds, model: str = "team") -> RoutePlan:
    return plan_route(world, model, key(), needs=needs)


def refusal(world: ConfigSnapshot, needs: RequestNeeds, model: str = "team") -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        plan(world, needs, model)
    return caught.value


def diagnostics(error: GatewayError) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads(error.body())
    return body["diagnostics"]


def test_a_prompt_too_big_for_a_model_skips_it_and_says_why() -> None:
    planned = plan(world("acme/tiny", "acme/huge", "acme/unknown"), RequestNeeds(input_tokens=500))

    assert described(planned.targets) == [("acme/huge", 1, 1), ("acme/unknown", 1, 2)]
    assert [(t.label, why) for t, why in planned.skipped] == [("acme/tiny", "context_window")]


def test_tools_skip_a_model_without_tool_calling() -> None:
    planned = plan(world("acme/plain", "acme/able"), TOOLS)

    assert described(planned.targets) == [("acme/able", 1, 1)]
    assert [(t.label, why) for t, why in planned.skipped] == [("acme/plain", "tools")]


def test_structured_output_skips_a_model_without_it() -> None:
    planned = plan(world("acme/plain", "acme/unknown"), STRUCTURED)

    assert described(planned.targets) == [("acme/unknown", 1, 1)]  # unknown: kept


def test_without_needs_nothing_is_filtered() -> None:
    planned = plan(world("acme/tiny", "acme/plain"), NO_NEEDS)

    assert len(planned.targets) == 2 and planned.skipped == ()


def test_every_target_too_small_is_404_context_requirements_exhausted() -> None:
    needs = RequestNeeds(input_tokens=90, max_output_tokens=20)

    error = refusal(world("acme/tiny"), needs)

    assert (error.status, error.code) == (404, "context_requirements_exhausted")
    assert "about 90 input tokens plus 20 output tokens" in error.message
    assert diagnostics(error) == {
        "terminalReason": "context_requirements_exhausted",
        "inputTokens": 90,
        "maxOutputTokens": 20,
        "skipped": [
            {"provider": "acme", "model": "tiny", "connection": 1, "reasons": ["context_window"]}
        ],
    }


def test_every_target_incapable_is_400_capability_mismatch() -> None:
    error = refusal(world("acme/plain"), RequestNeeds(tools=True, structured_output=True))

    assert (error.status, error.code) == (400, "capability_mismatch")
    assert error.message.endswith("needs: tools, structured output.")
    (skipped,) = diagnostics(error)["skipped"]
    assert skipped["reasons"] == ["tools", "structured_output"]
    assert diagnostics(error)["terminalReason"] == "capability_mismatch"


def test_incapable_and_too_small_targets_together_are_a_capability_mismatch() -> None:
    needs = RequestNeeds(tools=True, input_tokens=500)

    error = refusal(world("acme/plain", "acme/tiny"), needs)

    assert error.code == "capability_mismatch"  # a target big enough exists, but cannot
    reasons = [s["reasons"] for s in diagnostics(error)["skipped"]]
    assert reasons == [["tools"], ["context_window"]]


def test_fail_open_uses_the_incapable_targets_when_none_is_left() -> None:
    planned = plan(world("acme/plain", options=FAIL_OPEN), TOOLS)

    assert described(planned.targets) == [("acme/plain", 1, 0)]
    assert planned.skipped == ()


def test_fail_open_never_restores_a_target_that_is_too_small() -> None:
    needs = RequestNeeds(tools=True, input_tokens=500)

    planned = plan(world("acme/plain", "acme/tiny", options=FAIL_OPEN), needs)

    assert described(planned.targets) == [("acme/plain", 1, 0)]
    assert [(t.label, why) for t, why in planned.skipped] == [("acme/tiny", "context_window")]


def test_fail_open_still_refuses_when_every_target_is_too_small() -> None:
    error = refusal(world("acme/tiny", options=FAIL_OPEN), RequestNeeds(input_tokens=500))

    assert error.code == "context_requirements_exhausted"


def test_fail_open_keeps_filtering_while_a_capable_target_is_left() -> None:
    planned = plan(world("acme/plain", "acme/able", options=FAIL_OPEN), TOOLS)

    assert described(planned.targets) == [("acme/able", 1, 1)]


@pytest.mark.parametrize(
    ("model", "needs", "code"),
    [
        ("acme/tiny", RequestNeeds(input_tokens=101), "context_requirements_exhausted"),
        ("acme/plain", TOOLS, "capability_mismatch"),
        ("acme/plain", STRUCTURED, "capability_mismatch"),
    ],
)
def test_a_single_model_is_left_to_its_upstream(model: str, needs: RequestNeeds, code: str) -> None:
    planned = plan(world(), needs, model)  # a stale catalog entry never refuses it

    assert [t.label for t in planned.targets] == [model] and planned.skipped == ()


def test_a_single_model_that_fits_is_planned() -> None:
    planned = plan(world(), RequestNeeds(input_tokens=100), "acme/tiny")

    assert described(planned.targets) == [("acme/tiny", 1, 0)]


def test_one_snapshots_combo_is_checked_again_for_each_requests_needs() -> None:
    team = world("acme/tiny", "acme/huge")

    first = plan(team, NO_NEEDS)
    large = plan(team, RequestNeeds(input_tokens=500))
    again = plan(team, NO_NEEDS)

    assert (
        described(first.targets)
        == described(again.targets)
        == [
            ("acme/tiny", 1, 0),
            ("acme/huge", 1, 1),
        ]
    )
    assert described(large.targets) == [("acme/huge", 1, 1)]
    assert [(t.label, why) for t, why in large.skipped] == [("acme/tiny", "context_window")]


def test_what_a_request_needs_is_read_only_when_a_combos_targets_are_checked() -> None:
    asked: list[str] = []

    def needs() -> RequestNeeds:
        asked.append("read")
        return RequestNeeds(input_tokens=500)

    single = plan_route(world("acme/tiny"), "acme/tiny", key(), needs=needs)
    assert asked == [] and described(single.targets) == [("acme/tiny", 1, 0)]

    team = plan_route(world("acme/tiny", "acme/huge"), "team", key(), needs=needs)
    assert asked == ["read"] and described(team.targets) == [("acme/huge", 1, 1)]
