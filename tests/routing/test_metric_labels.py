"""The labels of the request metrics stay bounded: a model gets a series of its own only when
the catalog or a combo names it, every other one is ``other`` (docs/operating.md, "Logs,
metrics and probes")."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from omniroute.core.observability.metrics import (
    COUNTED,
    OTHER,
    AttemptResult,
    clear_counted,
    count_attempt,
    count_request,
)
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.config.snapshot import CatalogEntry, ComboInfo, ComboStep, ConfigSnapshot
from routing.proxy.telemetry import AccessRecord, known_models, record_request, request_metrics
from tests.routing.auto_support import target

UNKNOWN = 10_000


def snapshot() -> ConfigSnapshot:
    return ConfigSnapshot(
        catalog={("mock", "gpt-x"): CatalogEntry("mock", "gpt-x")},
        combos={
            "fast": ComboInfo("fast", "priority", (ComboStep("other-co", "claude-y"),)),
            "globbed": ComboInfo("globbed", "priority", (ComboStep("mock", "gpt-4*"),)),
        },
    )


def series() -> int:
    """How many request-metric samples the registry exposes now."""
    names = {metric._name for metric in COUNTED}
    return sum(
        len(family.samples)
        for family in REGISTRY.collect()
        if family.name in names or family.name.removesuffix("_total") in names
    )


@pytest.mark.parametrize(
    ("model", "label"),
    [
        ("gpt-x", "gpt-x"),  # in the catalog
        ("mock/gpt-x", "mock/gpt-x"),
        ("fast", "fast"),  # a combo's name
        ("claude-y", "claude-y"),  # a combo's step
        ("other-co/claude-y", "other-co/claude-y"),
        ("gpt-4o", OTHER),  # only a glob step names it
        ("made-up", OTHER),
    ],
)
def test_a_model_is_labelled_only_when_the_configuration_names_it(model: str, label: str) -> None:
    assert request_metrics(snapshot(), model, []).model == label


def test_known_models_are_built_once_per_snapshot() -> None:
    config = snapshot()
    assert known_models(config) is known_models(config)
    assert known_models(ConfigSnapshot()) == frozenset()


@pytest.mark.usefixtures("request_metrics")  # the fixture: the function imported has its name
def test_ten_thousand_unknown_models_add_no_series() -> None:
    config = snapshot()
    tried = target(1, model="made-up-0")
    success = Outcome(OutcomeKind.SUCCESS, status=200)

    def finish(model: str) -> None:
        labels = request_metrics(config, f"mock/{model}", [(tried, success)])
        record = AccessRecord("r", "POST", "/v1/chat/completions", "k", model, "-", 200, 1, 1, 0, 1)
        record_request(record, labels)

    finish("made-up-0")
    after_one = series()
    for n in range(1, UNKNOWN):
        finish(f"made-up-{n}")

    assert series() == after_one
    [sample] = [
        s
        for family in REGISTRY.collect()
        if family.name == "omniroute_requests"
        for s in family.samples
        if s.name == "omniroute_requests_total"
    ]
    assert sample.labels["model"] == OTHER and sample.value == UNKNOWN


@pytest.mark.usefixtures("request_metrics")
def test_a_series_counts_again_after_the_families_are_emptied() -> None:
    """Each series is looked up once and kept; emptying the families forgets the kept ones,
    else later counts would go to series ``/metrics`` no longer shows."""
    labels = {"provider": "mock", "model": "mock/m", "result": AttemptResult.SUCCESS}
    count_attempt("mock", "mock/m", AttemptResult.SUCCESS, "success")
    clear_counted()
    count_attempt("mock", "mock/m", AttemptResult.SUCCESS, "success")
    count_attempt("mock", "mock/m", AttemptResult.SUCCESS, "success")
    assert REGISTRY.get_sample_value("omniroute_upstream_attempt_results_total", labels) == 2.0


@pytest.mark.usefixtures("request_metrics")
def test_a_requests_series_count_again_after_the_families_are_emptied() -> None:
    labels = {"endpoint": "/v1/chat/completions", "provider": "mock", "model": "mock/m"}
    count_request("/v1/chat/completions", 200, "mock", "mock/m", 0.01)
    clear_counted()
    for _ in range(2):
        count_request("/v1/chat/completions", 200, "mock", "mock/m", 0.01)

    total = {**labels, "status": "200", "status_class": "2xx"}
    assert REGISTRY.get_sample_value("omniroute_requests_total", total) == 2.0
    assert REGISTRY.get_sample_value("omniroute_request_duration_seconds_count", labels) == 2.0
    count_request("/v1/chat/completions", 503, "mock", "mock/m", 0.01)
    failed = {**labels, "status": "503", "status_class": "5xx"}
    assert REGISTRY.get_sample_value("omniroute_requests_total", failed) == 1.0
