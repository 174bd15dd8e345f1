"""The alert rules (ops/prometheus/alerts.yml) under `promtool test rules`: each fires when it should and not otherwise.

Each case is input series (promtool notation) and, at a time, the alerts
expected to fire; every alert has at least one case, most a firing and a quiet
one (tests/ops/test_deployment.py checks the rules' syntax, metric names and
runbook links).
"""

from __future__ import annotations

import copy

import pytest

yaml = pytest.importorskip("yaml")

from tests.support.deployment import PROM, alert_rules, promtool, read_yaml, run_ok  # noqa: E402


@pytest.fixture(scope="module")
def alerts() -> dict:
    return read_yaml(PROM / "alerts.yml")


# Rule unit tests: each case is input series (promtool notation) and, at a time,
# the alerts expected to fire. Annotations are stripped (they are templates
# checked by `promtool check rules`); labels are compared exactly.
ALERT_CASES = [
    ("FluxmatJobDown", {'up{job="fluxmat", instance="fluxmat:9108"}': "1 1 0x10"}, "10m",
     [{"job": "fluxmat", "instance": "fluxmat:9108", "severity": "critical"}]),
    ("FluxmatJobDown", {'up{job="other"}': "1x10"}, "10m", [{"job": "fluxmat", "severity": "critical"}]),
    ("FluxmatJobDown", {'up{job="fluxmat"}': "1x10"}, "10m", []),
    ("FluxmatConsumerLagHigh", {'fluxmat_consumer_lag_messages{topic="updates", partition="0"}': "20000x10"},
     "10m", [{"topic": "updates", "severity": "warning"}]),
    ("FluxmatConsumerLagGrowing", {'fluxmat_consumer_lag_messages{topic="updates", partition="0"}': "0+100x40"},
     "40m", [{"topic": "updates", "severity": "warning"}]),
    ("FluxmatConsumerLagGrowing", {'fluxmat_consumer_lag_messages{topic="updates", partition="0"}': "5000-100x40"},
     "40m", []),
    ("FluxmatNoConsistencyPoint", {"fluxmat_last_consistency_point_timestamp_seconds": "0x30",
                                   'fluxmat_consumer_lag_messages{topic="updates", partition="0"}': "5x30"},
     "30m", [{"severity": "critical"}]),
    ("FluxmatNoConsistencyPoint", {"fluxmat_last_consistency_point_timestamp_seconds": "0x30",
                                   'fluxmat_consumer_lag_messages{topic="updates", partition="0"}': "0x30"},
     "30m", []),
    ("FluxmatBatchDurationHigh", {'fluxmat_batch_duration_seconds_bucket{le="30"}': "0x30",
                                  'fluxmat_batch_duration_seconds_bucket{le="60"}': "0+1x30",
                                  'fluxmat_batch_duration_seconds_bucket{le="+Inf"}': "0+1x30"},
     "30m", [{"severity": "warning"}]),
    ("FluxmatBatchDurationHigh", {'fluxmat_batch_duration_seconds_bucket{le="1"}': "0+1x30",
                                  'fluxmat_batch_duration_seconds_bucket{le="+Inf"}': "0+1x30"}, "30m", []),
    ("FluxmatDeadLetters", {"fluxmat_dead_letters_total": "0 0 0 1 1"}, "4m", [{"severity": "warning"}]),
    ("FluxmatDeadLetters", {"fluxmat_dead_letters_total": "3x20"}, "20m", []),
    ("FluxmatBatchFailures", {"fluxmat_batch_failures_total": "0 1 1"}, "2m", [{"severity": "critical"}]),
    ("FluxmatPendingOperationsNotDraining", {"fluxmat_pending_operations": "7x30"}, "30m", [{"severity": "warning"}]),
    ("FluxmatPendingOperationsNotDraining", {"fluxmat_pending_operations": "7 7 7 0 7 7 7 7 7 0 7 7"}, "11m", []),
    # Redis memory as a share of maxmemory (never without a maxmemory: no share to take)
    ("FluxmatRedisMemoryHigh", {"fluxmat_redis_used_memory_bytes": "8e8x20", "fluxmat_redis_maxmemory_bytes": "9e8x20"},
     "20m", [{"severity": "warning"}]),
    ("FluxmatRedisMemoryHigh", {"fluxmat_redis_used_memory_bytes": "5e8x20", "fluxmat_redis_maxmemory_bytes": "9e8x20"},
     "20m", []),
    ("FluxmatRedisMemoryHigh", {"fluxmat_redis_used_memory_bytes": "8e9x20", "fluxmat_redis_maxmemory_bytes": "0x20"},
     "20m", []),
    # the namespace grows 1 MB a minute: in 6 h, 360 MB more -- past a 900 MB maxmemory, not past 2 GB;
    # a full but flat state is FluxmatRedisMemoryHigh's, not this one's
    ("FluxmatStateGrowth", {"fluxmat_state_namespace_bytes": "1e8+1e6x90", "fluxmat_redis_used_memory_bytes": "6e8+1e6x90",
                            "fluxmat_redis_maxmemory_bytes": "9e8x90"}, "60m", [{"severity": "warning"}]),
    ("FluxmatStateGrowth", {"fluxmat_state_namespace_bytes": "1e8+1e6x90", "fluxmat_redis_used_memory_bytes": "6e8+1e6x90",
                            "fluxmat_redis_maxmemory_bytes": "2e9x90"}, "60m", []),
    ("FluxmatStateGrowth", {"fluxmat_state_namespace_bytes": "1e8x90", "fluxmat_redis_used_memory_bytes": "8.5e8x90",
                            "fluxmat_redis_maxmemory_bytes": "9e8x90"}, "60m", []),
    # a real stall pages within 2 minutes of the last commit (age > 90 s, for 30 s); idleness never
    ("FluxmatStalled", {"fluxmat_consistency_point_age_seconds": "0+60x4", "fluxmat_idle": "0x4"}, "3m",
     [{"severity": "critical"}]),
    ("FluxmatStalled", {"fluxmat_consistency_point_age_seconds": "0+60x30", "fluxmat_idle": "1x30"}, "30m", []),
    # behind for 5 minutes pages; a burst that drains within 5 minutes and idleness (time lag 0) do not
    # a batch in flight for over 30 s (for 30 s) pages naming its phase; short batches and idleness never
    ("FluxmatBatchInFlightLong", {'fluxmat_batch_in_flight_phase{phase="commit"}': "0 1 1 1 1",
                                  'fluxmat_batch_in_flight_phase{phase="engine"}': "0x4",
                                  "fluxmat_batch_in_flight_seconds": "0 60 120 180 240"}, "4m",
     [{"phase": "commit", "severity": "warning"}]),
    ("FluxmatBatchInFlightLong", {'fluxmat_batch_in_flight_phase{phase="commit"}': "0 1 0 1 0 1 0 1 0 1",
                                  "fluxmat_batch_in_flight_seconds": "0 3 0 4 0 2 0 3 0 4"}, "9m", []),
    ("FluxmatBatchInFlightLong", {'fluxmat_batch_in_flight_phase{phase="commit"}': "0x10",
                                  "fluxmat_batch_in_flight_seconds": "0x10"}, "10m", []),
    ("FluxmatBatchInFlightLong", {'fluxmat_batch_in_flight_phase{namespace="a", phase="publish"}': "1x5",
                                  'fluxmat_batch_in_flight_seconds{namespace="a"}': "0+60x5",
                                  'fluxmat_batch_in_flight_phase{namespace="b", phase="engine"}': "1x5",
                                  'fluxmat_batch_in_flight_seconds{namespace="b"}': "0 1 0 1 0 1"}, "5m",
     [{"namespace": "a", "phase": "publish", "severity": "warning"}]),
    ("FluxmatFallingBehind", {"fluxmat_time_lag_seconds": "0 100 160 220 280 340 400 460 520"}, "8m",
     [{"severity": "warning"}]),
    ("FluxmatFallingBehind", {"fluxmat_time_lag_seconds": "0 100 160 220 280 0 0 130 190 250 0"}, "10m", []),
    ("FluxmatFallingBehind", {"fluxmat_time_lag_seconds": "0x60"}, "60m", []),
    ("FluxmatFailing", {"fluxmat_health_state": "0 2 2 2"}, "3m", [{"severity": "critical"}]),
    ("FluxmatFailing", {"fluxmat_health_state": "1x10"}, "10m", []),
    # per job: a failing namespace is named, a healthy one beside it is not
    ("FluxmatFailing", {'fluxmat_health_state{namespace="a"}': "2x5", 'fluxmat_health_state{namespace="b"}': "0x5"},
     "5m", [{"namespace": "a", "severity": "critical"}]),
    ("FluxmatStalled", {'fluxmat_consistency_point_age_seconds{namespace="a"}': "0+60x4",
                        'fluxmat_idle{namespace="a"}': "0x4", 'fluxmat_idle{namespace="b"}': "1x4",
                        'fluxmat_consistency_point_age_seconds{namespace="b"}': "0+60x4"}, "3m",
     [{"namespace": "a", "severity": "critical"}]),
    ("FluxmatSelfCheckDifferent", {'fluxmat_verifications_total{result="different"}': "0 0 1 1"}, "3m",
     [{"severity": "critical"}]),
    ("FluxmatSelfCheckDifferent", {'fluxmat_verifications_total{result="exact"}': "0+1x10"}, "10m", []),
    ("FluxmatDeadLetterRatio", {"fluxmat_dead_letters_total": "0+10x30", "fluxmat_updates_consumed_total": "0+50x30"},
     "30m", [{"severity": "warning"}]),
    ("FluxmatDeadLetterRatio", {"fluxmat_dead_letters_total": "0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
                                "fluxmat_updates_consumed_total": "0+50x23"}, "23m", []),  # one bad message
    ("FluxmatCrashLoop", {'process_start_time_seconds{job="fluxmat"}': "100 100 400 400 700 700 1000"}, "6m",
     [{"job": "fluxmat", "severity": "warning"}]),
    ("FluxmatCrashLoop", {'process_start_time_seconds{job="fluxmat"}': "100x30"}, "30m", []),
    ("FluxmatRetrying", {'fluxmat_retries_total{target="redis"}': "0+3x10"}, "10m",
     [{"target": "redis", "severity": "warning"}]),
    ("FluxmatRetrying", {'fluxmat_retries_total{target="redis"}': "0 4 4 4 4 4 4 4 4 4 4 4"}, "11m", []),
]  # fmt: skip


def test_every_alert_has_a_unit_test_case(alerts):
    assert {r["alert"] for r in alert_rules(alerts)} - {c[0] for c in ALERT_CASES} == {"FluxmatUpdateLatencyHigh"}


def test_alert_rules_fire_when_they_should(alerts, tmp_path):
    tool = promtool()
    stripped = copy.deepcopy(alerts)
    for rule in alert_rules(stripped):
        rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(stripped))
    tests = [{
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series.items()],
        "alert_rule_test": [{"eval_time": at, "alertname": name,
                             "exp_alerts": [{"exp_labels": labels} for labels in expected]}],
    } for name, series, at, expected in ALERT_CASES]  # fmt: skip
    (tmp_path / "tests.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "tests": tests}))
    run_ok([tool, "test", "rules", "tests.yml"], cwd=tmp_path)
