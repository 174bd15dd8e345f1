"""The update-latency histogram, observed a batch at a time, reads as prometheus_client's `Histogram`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from fluxmat.ops.collectors import DURATION_BUCKETS, BulkHistogram


def test_a_batch_of_values_is_bucketed_as_one_observation_at_a_time():
    values = [0.0, 0.01, 0.0100001, 0.3, 2.5, 2.6, 119.9, 120.0, 500.0, 0.004]  # bounds are inclusive (le)
    one, many = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("lat_seconds", "latency", buckets=DURATION_BUCKETS, registry=one)
    bulk = BulkHistogram("lat_seconds", "latency", DURATION_BUCKETS, many)
    for v in values:
        reference.observe(v)
    bulk.observe_many(values[:4])
    bulk.observe_many(values[4:9])
    bulk.observe(values[9])
    assert generate_latest(many) == generate_latest(one)  # fluxmat.ops.collectors turns `_created` off
