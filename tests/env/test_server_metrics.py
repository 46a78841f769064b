"""The reward server's verdict counters and item-time histogram (plain counts, exposed at scrape time)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from scalerl.env.contracts.domains import domain_names
from scalerl.env.contracts.records import Status, Verdict
from scalerl.env.server.metrics import LATENCY_BUCKETS_S, ServerMetrics


def samples(metrics: ServerMetrics) -> dict[tuple[str, tuple], float]:
    """Every sample of the exposition, parsed by prometheus_client's own parser: (name, labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


def test_every_verdict_series_exists_at_zero_before_the_first_item():
    got = samples(ServerMetrics(lambda: {}, "test"))
    for domain in domain_names():
        for status in Status:
            assert got["scalerl_verdicts_total", (("domain", domain), ("status", status.value))] == 0
        assert got["scalerl_item_verify_seconds_count", (("domain", domain),)] == 0


def test_counts_and_cumulative_buckets_with_inclusive_bounds():
    metrics = ServerMetrics(lambda: {}, "test")
    seconds = [0.005, 0.0051, 0.3, 500.0, -1.0]  # on a bound, just above it, mid, past the last, negative
    statuses = [Status.correct, Status.correct, Status.wrong, Status.timeout, Status.correct]
    metrics.observe(["math"] * 5, [Verdict.of(st, elapsed_s=s) for st, s in zip(statuses, seconds)])
    metrics.observe(["code"], [Verdict.of(Status.error, elapsed_s=2.0)])
    got = samples(metrics)

    def verdicts(domain: str, status: str) -> float:
        return got["scalerl_verdicts_total", (("domain", domain), ("status", status))]

    assert (verdicts("math", "correct"), verdicts("math", "wrong"), verdicts("math", "timeout")) == (3, 1, 1)
    assert verdicts("code", "error") == 1 and verdicts("code", "correct") == 0

    def bucket(domain: str, le: float) -> float:
        bound = "+Inf" if le == float("inf") else str(float(le))
        return got["scalerl_item_verify_seconds_bucket", (("domain", domain), ("le", bound))]

    assert bucket("math", 0.005) == 2  # the negative time counts as 0 s; 0.005 is inside le="0.005"
    assert bucket("math", 0.01) == 3
    assert bucket("math", 0.25) == 3 and bucket("math", 0.5) == 4
    assert bucket("math", LATENCY_BUCKETS_S[-1]) == 4 and bucket("math", float("inf")) == 5
    assert got["scalerl_item_verify_seconds_count", (("domain", "math"),)] == 5
    assert abs(got["scalerl_item_verify_seconds_sum", (("domain", "math"),)] - 500.3101) < 1e-9
    assert bucket("code", 1) == 0 and bucket("code", 2.5) == 1
