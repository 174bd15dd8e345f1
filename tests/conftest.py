"""Shared fixtures: real servers on loopback, stopped by PID.

Where a Docker engine is running and `testcontainers` is installed, the broker
and Redis fixtures use real Apache Kafka and Redis containers instead (set
`FLUXMAT_TEST_CONTAINERS=0` to force local processes). Without Docker (as on the
development machines and CI here) they run the embedded tansu broker and a local
redis-server; the tests never skip for lack of Docker.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fluxmat.connectors.broker import EmbeddedBroker
from tests.support import profile
from tests.support.servers import PostgresServer, RedisServer, free_port, postgres_bin

# Tests that start a server (Redis, a Kafka broker, Spark, a browser, a job) are marked
# `integration`: through these fixtures (wherever they are defined), because their module
# starts one itself (INTEGRATION_MODULES: every test of the module), or by an explicit
# `pytest.mark.integration` (a test or a fixture param). `make test-fast` runs the rest
# (`-m "not integration"`); a run whose `-m` cannot select an integration test does not even
# import the modules of INTEGRATION_MODULES (pytest_ignore_collect: a few seconds per worker).
SERVER_FIXTURES = {"redis_server", "redis_srv", "broker", "postgres", "tls", "paused_redis"}
INTEGRATION_MODULES = {
    "test_browser_harness", "test_dashboard", "test_dashboard_layout", "test_delta_counts",
    "test_export_cli", "test_kafka_connectors", "test_keyed", "test_ops_live", "test_ops_redis_faults",
    "test_owl_rdf_stream", "test_pipeline", "test_pipeline_checkpoint", "test_pipeline_keyed",
    "test_pipeline_poison",
    "test_rdf_stream", "test_retries", "test_state_bytes", "test_state_store", "test_stream_batch",
    "test_time_lag", "test_verify", "test_wire", "test_packaging",
    # every test of these uses a server fixture or is marked by hand
    "test_broker_restart", "test_collect", "test_eq_state_redis", "test_failover",
    "test_follow_causes", "test_follow_pipeline", "test_kafka_tls", "test_keyed_arrays",
    "test_ops_stall", "test_pipeline_arrays", "test_pipeline_keyed_program", "test_pipeline_program",
    "test_pipeline_program_equality", "test_pipeline_worker_late", "test_program_apply", "test_program_on_page",
    "test_slow_object_store", "test_walk",
}  # fmt: skip


# Unit tests that take more than ~2 s each (many random examples, exhaustive schedule searches,
# `fluxmat` subprocesses, long rules, corpus replays) are marked `heavy`: by module, or by
# "module::test" (every parametrisation of the test). `make test` runs them; `make test-fast` leaves
# them out (`-m "not integration and not heavy"`). A name here that matches no test is an error.
HEAVY = {
    # whole modules
    "test_long_rules", "test_hostile_rdf", "test_input_memory", "test_cli_limits",
    "test_program_changes_cli", "test_corpus", "test_fd_corpus", "test_bfeq", "test_bakeoff_cores",
    # single tests (all their parameters)
    "test_fd_examples::test_order_of_updates_every_schedule",
    "test_fd_examples::test_example3_deletion_without_derivation_every_schedule",
    "test_fd_examples::test_example2_as_two_updates_every_schedule",
    "test_fd_examples::test_consistency_points_random",
    "test_fd_examples::test_exploration_memo_is_exact_on_example1",
    "test_fd_examples::test_order_of_updates_random_interleavings",
    "test_program_changes::test_changes_equal_evaluation_from_scratch",
    "test_owl_rdf::test_lubm1_slice_rdf_mode_equals_owlrl",
    "test_owl2rl::test_lubm_equals_owlrl_on_the_shared_vocabulary",
    "test_follow::test_follow_refuses_bad_places_with_one_error_line",
    "test_compact_door::test_cli_core_flag_replays_like_objects",
    "test_compact_fed::test_fed_updates_equal_objects_fd_counting_and_remat",
    "test_small_updates::test_random_programs_one_call_set_objects_scratch",
    "test_config::test_fluxmat_run_reads_the_file_and_reports_a_bad_one_in_one_line",
    "test_cli::test_run_flags_are_checked_before_connecting",
    "test_client::test_client_decodes_and_encodes_facts_as_the_engine",
    "test_owl2rl::test_lubm_equals_lubm_dlog_on_its_fragment",
    "test_owl2rl::test_cli_owl2rl_warns_on_stderr_and_program_is_optional",
    "test_owl2rl::test_transitive_property_is_a_tc_module",
    "test_compact_core::test_random_programs_and_updates",
    "test_compact_fed::test_fed_recursion_and_negation",
    "test_compact_door::test_cache_folder_chosen_when_nothing_default_is_writable",
    "test_compact_door::test_each_kernel_compiled_once",
    "test_compact_door::test_lubm_load_and_batches_equal_remat",
    "test_bakeoff_columnar::test_columnar_matches_the_engine_after_every_update",
    "test_owl_rdf::test_owl2rl_prints_the_rdf_program_and_it_reads_back",
    "test_owl_rdf::test_lubm_rdf_mode_equals_owlrl_on_the_data_vocabulary",
    "test_fd_examples::test_example4_duplicate_derivation_every_schedule",
    "test_alerts::test_alert_rules_fire_when_they_should",
    "test_program_changes::test_changes_with_the_small_update_path_ready",
    "test_why_json::test_why_json_of_a_2000_step_proof_reads_back_with_default_limits",
    "test_parser::test_lexer_memory_is_linear_in_the_input",
    "test_sparql::test_cli_sparql_file_query_and_errors",
    "test_hypertree::test_updates_equal_with_and_without_hypertree",
    # over 2 s of CPU each in the fast lane (tests/support/cputime.py, docs/testing.md)
    "test_sparql::test_lubm_answers_equal_pyoxigraph_over_owlrl",
    "test_compact_equality::test_cli_materialise_and_replay_with_equality_on_the_arrays_core",
    "test_docs::test_tutorial_commands_print_what_the_tutorial_shows",
    "test_docs::test_strict_build_fails_on_a_broken_link",
    "test_docs::test_strict_build_ignores_incoming_pages",
    "test_small_updates::test_background_compile_reports_ready",
    "test_small_updates::test_a_small_update_starts_the_compile_and_the_set_path_serves_meanwhile",
    "test_layering::test_cycle_check_catches_a_reintroduced_cycle",
    "test_cli::test_explain_prints_every_stage",
}  # fmt: skip
# Integration tests whose outcome depends on timing (Redis stalls and pauses, late workers,
# failover, retry windows, lag, a broker restart, a standalone Spark cluster): marked `alone`.
# `make test` runs the other integration tests two at a time (pytest-xdist) and these one at a
# time afterwards, so that no other Spark job shares the CPU with them.
ALONE_MODULES = {
    "test_ops_stall", "test_ops_redis_faults", "test_pipeline_worker_late", "test_failover",
    "test_retries", "test_time_lag", "test_restart_lag", "test_broker_restart",
    "test_pipeline_keyed", "test_job_budget", "test_inflight", "test_slow_object_store",
}  # fmt: skip


def pytest_configure(config):
    profile.load_hypothesis_profile()


def pytest_report_header(config):
    return f"fluxmat test profile: {profile.name()} (FLUXMAT_TEST_PROFILE; see tests/support/profile.py)"


def pytest_ignore_collect(collection_path, config):
    """Leave a module of INTEGRATION_MODULES unimported when `-m` selects no integration test."""
    if collection_path.stem in INTEGRATION_MODULES and not _may_select(config, "integration"):
        return True
    return None


def _may_select(config, marker: str) -> bool:
    """Whether `-m` can select a test marked `marker`, whatever its other markers are."""
    text = config.option.markexpr
    if not text:
        return True
    from _pytest.mark.expression import Expression

    names = sorted(set(re.findall(r"[\w.]+", text)) - {"and", "or", "not", marker})
    if len(names) > 8:
        return True
    try:
        expression = Expression.compile(text)
        return any(
            expression.evaluate(_matcher({marker, *chosen})) for chosen in _subsets(names)
        )
    except Exception:  # a pytest whose expressions differ: collect everything
        return True


def _matcher(markers: set[str]):
    return lambda name, **_: name in markers


def _subsets(names: list[str]):
    for mask in range(2 ** len(names)):
        yield {n for i, n in enumerate(names) if mask >> i & 1}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: every collected test is marked
def pytest_collection_modifyitems(config, items):
    seen = set()
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        test = f"{module}::{getattr(item, 'originalname', item.name)}"
        seen |= {module, test}
        if SERVER_FIXTURES & set(item.fixturenames) or module in INTEGRATION_MODULES:
            item.add_marker(pytest.mark.integration)
        elif module in HEAVY or test in HEAVY:
            item.add_marker(pytest.mark.heavy)
        # also the tests marked `integration` by hand (or by a fixture param) in an ALONE module
        if module in ALONE_MODULES and item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.alone)
    unknown = sorted(HEAVY - seen) if _whole_suite(config) else []
    if unknown:
        raise pytest.UsageError(f"tests/conftest.py HEAVY: no test named {', '.join(unknown)}")


def _whole_suite(config) -> bool:
    """Whether this run collects every test module (no paths or `-k` given), so HEAVY can be checked."""
    paths = [Path(a).resolve() for a in config.args]
    return not config.option.keyword and paths == [Path(__file__).resolve().parent]


def docker_available() -> bool:
    if os.environ.get("FLUXMAT_TEST_CONTAINERS") == "0" or not shutil.which("docker"):
        return False
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20)
    return probe.returncode == 0


class _ContainerRedis:
    """The subset of RedisServer the shared fixture offers (no restarts)."""

    def __init__(self, url: str):
        self.url = url


class _ContainerKafka:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap


@pytest.fixture(scope="session")
def use_containers() -> bool:
    return docker_available()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory, use_containers):
    if use_containers:
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as c:
            yield _ContainerRedis(f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}/0")
        return
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_srv(tmp_path_factory):
    """A module's own redis-server, which its tests may restart (`redis_server` is shared)."""
    server = RedisServer(tmp_path_factory.mktemp("redis-module")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def postgres():
    """A module's own PostgreSQL cluster (initdb, pg_ctl on a loopback port); skips without the binaries."""
    if postgres_bin() is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, use_containers):
    """A Kafka broker per test module: an Apache Kafka container, or embedded tansu."""
    if use_containers:
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as c:
            yield _ContainerKafka(c.get_bootstrap_server())
        return
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    # a port outside the ephemeral range (tests/support/servers.py free_port): with two xdist
    # workers, another module's clients could take an ephemeral one before tansu binds it
    with EmbeddedBroker(port=free_port(), log_path=log) as b:
        yield b


@pytest.fixture
def reap():
    """`reap(subprocess.Popen(...))`: the process is SIGKILLed at the test's end if still running."""
    from tests.support.cli import Reaper

    with Reaper() as reaper:
        yield reaper


# ------------------------------------------------------------------ artifacts
ARTIFACTS = Path(os.environ.get("FLUXMAT_ARTIFACTS") or Path(__file__).resolve().parent.parent / ".artifacts")


@pytest.fixture
def artifacts_dir() -> Path:
    """Where tests leave files for people to look at (screenshots): kept after the run.

    `$FLUXMAT_ARTIFACTS`, else `<repo>/.artifacts/` (git-ignored); created if
    missing, never emptied, so name files after the test that writes them.
    """
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
