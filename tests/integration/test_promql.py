"""metric_names finds exactly the metrics a PromQL expression selects (the deploy/ checks rely on it)."""

from __future__ import annotations

import pytest

from promql import exported_names, metric_names


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('up{job="hyperdata-sidecar"} == 0 or absent(up{job="hyperdata-sidecar"})', {"up"}),
        ("sum by (job, instance) (increase(a_total[15m])) > 0", {"a_total"}),
        ("sum(rate(a_total[$__rate_interval])) by (le, table) * 60", {"a_total"}),
        ('histogram_quantile(0.99, sum by (le) (rate(h_seconds_bucket{table=~"$table"}[5m])))', {"h_seconds_bucket"}),
        ("max by (instance, table) (lag) > on (job, instance) group_left max by (instance) (warn)", {"lag", "warn"}),
        ("a > on (job) group_left (table) b", {"a", "b"}),
        ("(time() - start_seconds > 65 * 60) unless on () (hour() == 0)", {"start_seconds"}),
        ("a offset 5m > bool 1e3", {"a"}),
        ('label_replace(a, "dst", "$1", "src", "(by) {x} [y] z")', {"a"}),
        ("ns:recorded:rate5m / ignoring (reason) b", {"ns:recorded:rate5m", "b"}),
        ("a unless b and c", {"a", "b", "c"}),
        ("vector(1) + scalar(a) - Inf", {"a"}),
    ],
)
def test_metric_names_are_the_selected_metrics_only(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_exported_names_are_the_samples_and_the_declared_families() -> None:
    exposition = "\n".join(
        [
            "# HELP a_total Things.",
            "# TYPE a_total counter",
            'a_total{table="x"} 3.0',
            'a_created{table="x"} 1.7e+09',
            "# HELP lonely_seconds Declared, no series yet.",
            "# TYPE lonely_seconds gauge",
            "# HELP h_seconds Durations.",
            "# TYPE h_seconds histogram",
        ]
    )

    assert exported_names(exposition) == {
        "a_total",
        "a_created",
        "lonely_seconds",
        "h_seconds",
        "h_seconds_bucket",
        "h_seconds_sum",
        "h_seconds_count",
    }
