"""The job's settings: one declaration (stream.config), read from flags, environment and a TOML file.

Precedence flags > environment > --config file > defaults; unknown keys and wrong
types in the file name the file, line and key; every check refuses a bad value
whichever way it was given (flag, variable, file, or a JobConfig built in code);
--print-config writes a file that reads back to the same JobConfig.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from dataclasses import fields

import pytest

from fluxmat.engine import FluxmatError
from fluxmat.ops.cli import build_parser, main
from fluxmat.ops.stream_cli import job_config
from fluxmat.stream.config import SETTINGS, JobConfig
from fluxmat.stream.config_sources import toml_value

REQUIRED = {"bootstrap_servers": "127.0.0.1:1", "updates_topic": "u", "deltas_topic": "d",
            "redis": "memory://", "checkpoint": "cp"}  # fmt: skip
BASE = ["run", "p.dl", "--bootstrap-servers", "127.0.0.1:1", "--updates-topic", "u", "--deltas-topic", "d",
        "--redis", "memory://", "--checkpoint", "cp"]  # fmt: skip


def cfg_of(argv: list[str], environ: dict | None = None) -> JobConfig:
    """The JobConfig `fluxmat run ARGV` would use in environment `environ` (nothing else of the process's)."""
    return job_config(build_parser().parse_args(argv), environ or {})


def toml(tmp_path, text: str, name: str = "job.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def refused(fragment: str, argv: list[str], environ: dict | None = None) -> str:
    with pytest.raises(FluxmatError) as exc:
        cfg_of(argv, environ)
    assert fragment in str(exc.value), str(exc.value)
    return str(exc.value)


@pytest.fixture
def kafka_file(tmp_path) -> str:
    return toml(tmp_path, "security.protocol=PLAINTEXT\n", "kafka.properties")


def samples(kafka_file: str, keyed: bool = True) -> dict[str, object]:
    """A valid value of every setting (a new setting must get one here); keyed or not (then with --verify-every)."""
    return {
        "program": "q.dl", "facts": ("a.dl", "b.nt"), "ontology": ("o.ttl",), "owl_rules": "rdf",
        "facts_format": "turtle", "delta_format": "ntriples", "bootstrap_servers": "kafka:9092",
        "updates_topic": "up", "deltas_topic": "down", "dead_letter_topic": "dead", "kafka_config": kafka_file,
        "redis": "redis://127.0.0.1:6390/2", "namespace": "ns", "redis_retry_seconds": 1.5,
        "redis_timeout": 2.0, "stall_seconds": 7.25, "redis_wait_replicas": 1, "checkpoint": "/tmp/ck",
        "max_updates_per_batch": 50, "trigger_interval": "2 seconds", "budget": 7, "algorithm": "fd-dred", "core": "objects",
        "master": "local[3]", "metrics_port": 9108, "metrics_host": "0.0.0.0", "dashboard_port": 8088,
        "dashboard_host": "0.0.0.0", "auth_token": "tok", "starting_offsets": '{"0": 5}',
        "max_message_bytes": 0, "max_update_work": 99, "verify_every": 0, "max_facts": 12345,
        "partition_by": "message-key", "key_partitions": 4, "driver_host": "h", "engine_cache_facts": 10,
        "delta_compression": "gzip", "redis_fsync": "always", "redis_cluster": True,
        "snapshot_dir": "/tmp/snaps", "snapshot_every": 30.0, "snapshot_every_batches": 5,
        "equality": "off",
    } | ({} if keyed else {"partition_by": "none", "verify_every": 3, "equality": "rewrite", "core": "arrays"})  # fmt: skip


def as_text(value) -> str:
    """A sample as a flag's or a variable's text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return ":".join(value) if isinstance(value, tuple) else str(value)


def test_the_samples_cover_every_setting_and_every_field_but_two_is_a_setting(kafka_file):
    assert set(samples(kafka_file)) == set(SETTINGS)
    assert {f.name for f in fields(JobConfig)} - set(SETTINGS) == {"updates_partitions", "core_given"}
    for name in SETTINGS:  # else a source that is ignored goes unseen
        default = SETTINGS[name].default
        assert default != samples(kafka_file)[name] or default != samples(kafka_file, False)[name], name


@pytest.mark.parametrize("keyed", [True, False])
def test_every_setting_is_read_from_its_environment_variable(kafka_file, keyed):
    values = samples(kafka_file, keyed)
    environ = {f"FLUXMAT_{name.upper()}": as_text(v) for name, v in values.items()}
    assert JobConfig(**values) == cfg_of(["run"], environ)


@pytest.mark.parametrize("keyed", [True, False])
def test_every_setting_is_read_from_its_flag(kafka_file, keyed):
    argv = ["run"]
    for name, value in samples(kafka_file, keyed).items():
        flag = "--" + name.replace("_", "-")
        if name == "program":
            argv.append(value)
        elif isinstance(value, tuple):
            argv += [x for item in value for x in (flag, item)]
        elif isinstance(value, bool):
            argv.append(flag if value else f"--no-{flag[2:]}")
        else:
            argv += [flag, str(value)]
    assert JobConfig(**samples(kafka_file, keyed)) == cfg_of(argv)


@pytest.mark.parametrize("keyed", [True, False])
def test_every_setting_is_read_from_the_config_file(tmp_path, kafka_file, keyed):
    values = samples(kafka_file, keyed)
    path = toml(tmp_path, "".join(f"{name} = {toml_value(v)}\n" for name, v in values.items()))
    assert JobConfig(**values) == cfg_of(["run", "--config", path])


def test_flags_beat_the_environment_which_beats_the_file_which_beats_the_defaults(tmp_path):
    path = toml(tmp_path, 'redis_timeout = 1\nfacts = ["file.dl"]\nredis_cluster = true\nnamespace = "file"\n')
    env = {"FLUXMAT_REDIS_TIMEOUT": "2", "FLUXMAT_FACTS": "env.dl", "FLUXMAT_REDIS_CLUSTER": "no"}
    flags = ["--redis-timeout", "3", "--facts", "flag.dl", "--redis-cluster"]
    top = cfg_of([*BASE, "--config", path, *flags], env)
    assert (top.redis_timeout, top.facts, top.redis_cluster, top.namespace) == (3.0, ("flag.dl",), True, "file")
    middle = cfg_of([*BASE, "--config", path], env)
    assert (middle.redis_timeout, middle.facts, middle.redis_cluster) == (2.0, ("env.dl",), False)
    bottom = cfg_of([*BASE, "--config", path])
    assert (bottom.redis_timeout, bottom.facts, bottom.redis_cluster) == (1.0, ("file.dl",), True)
    default = cfg_of(BASE)
    assert (default.redis_timeout, default.facts, default.redis_cluster, default.namespace) == (120.0, (), False,
                                                                                                "default")  # fmt: skip
    assert cfg_of([*BASE, "--config", path, "--no-redis-cluster"]).redis_cluster is False  # a flag turns it off
    assert cfg_of(BASE, {"FLUXMAT_CONFIG": path}).namespace == "file"  # the file named by the environment


def test_required_settings_may_come_from_the_file_alone(tmp_path):
    path = toml(tmp_path, "".join(f"{k} = {toml_value(v)}\n" for k, v in REQUIRED.items()))
    assert cfg_of(["run", "p.dl", "--config", path]) == cfg_of(BASE)
    message = refused("--checkpoint is required (or set FLUXMAT_CHECKPOINT, or checkpoint in the --config file)",
                      ["run", "p.dl", "--config", toml(tmp_path, 'bootstrap_servers = "k:1"\n', "partial.toml")],
                      {"FLUXMAT_UPDATES_TOPIC": "u", "FLUXMAT_DELTAS_TOPIC": "d", "FLUXMAT_REDIS": "memory://"})
    assert message.startswith("--checkpoint")


def test_an_unknown_key_names_the_file_line_key_and_the_nearest_setting(tmp_path):
    path = toml(tmp_path, '# job\nnamespace = "n"\nredis_timout = 5\n')
    refused(f"{path}:3: unknown key 'redis_timout' (the nearest setting: 'redis_timeout')",
            [*BASE, "--config", path])  # fmt: skip
    path = toml(tmp_path, '"--dead-letter-topic" = "x"\n', "flagged.toml")
    refused(f"{path}:1: unknown key '--dead-letter-topic' (the nearest setting: 'dead_letter_topic')",
            [*BASE, "--config", path])  # fmt: skip
    path = toml(tmp_path, "updates_partitions = 4\n", "internal.toml")  # a field, but not a setting
    refused(f"{path}:1: unknown key 'updates_partitions'", [*BASE, "--config", path])


@pytest.mark.parametrize("line, expected", [
    ('redis_timeout = "30"', "redis_timeout expects a number of seconds, got a string '30'"),
    ("metrics_port = 9108.5", "metrics_port expects a whole number, got a float 9108.5"),
    ("budget = true", "budget expects a whole number, got a boolean True"),
    ('facts = "a.dl"', "facts expects a list of file names, got a string 'a.dl'"),
    ("facts = [1, 2]", "facts expects a list of file names, got an array [1, 2]"),
    ('redis_cluster = "yes"', "redis_cluster expects yes or no, got a string 'yes'"),
    ("namespace = 5", "namespace expects text, got an integer 5"),
    ("[namespace]\nname = 'x'", "namespace expects text, got a table"),
])  # fmt: skip
def test_a_wrong_type_in_the_file_names_line_key_and_expected_type(tmp_path, line, expected):
    path = toml(tmp_path, f"# settings\n\n{line}\n")
    refused(f"{path}:3: {expected}", [*BASE, "--config", path])


def test_a_file_that_is_not_toml_or_not_there_is_one_error(tmp_path):
    path = toml(tmp_path, 'namespace = "n"\nbudget = = 3\n')
    assert re.search(rf"^{re.escape(path)}:2:\d+: not a TOML file: ", refused("not a TOML file", [*BASE, "--config", path]))
    refused(f"{tmp_path / 'none.toml'}: cannot read the --config file: No such file or directory",
            [*BASE, "--config", str(tmp_path / "none.toml")])  # fmt: skip


BAD_VALUES = [  # (setting, value, what the one check says): checks that were written two or three times
    ("partition_by", "tenant", "must be one of none, message-key, graph, got 'tenant'"),
    ("redis", "http://:pw@host:6379", "expects redis://HOST:PORT/DB, rediss://... or memory://, got "
                                      "'http://:***@host:6379'"),
    ("trigger_interval", "soon", "expects a duration such as 500ms, 2s or '1 minute', got 'soon'"),
    ("trigger_interval", "5 fortnights", "expects a duration"),
    ("trigger_interval", "ms", "expects a duration"),
]  # fmt: skip


@pytest.mark.parametrize("name, value, problem", BAD_VALUES)
def test_each_check_refuses_a_bad_value_from_every_source(tmp_path, name, value, problem):
    flag, env = "--" + name.replace("_", "-"), f"FLUXMAT_{name.upper()}"
    others = [a for a in BASE if a not in ("--redis", "memory://")] if name == "redis" else BASE
    refused(f"{flag} {problem}", [*others, flag, value])
    refused(f"{env} {problem}", others, {env: value})
    path = toml(tmp_path, f"{name} = {toml_value(value)}\n")
    refused(f"{path}:1: {name} {problem}", [*others, "--config", path])
    with pytest.raises(FluxmatError, match=re.escape(f"{flag} {problem}")):  # built in code (the demo, tests)
        JobConfig(**{**REQUIRED, name: value})


def test_the_keyed_checks_refuse_from_every_source(tmp_path):
    """A keyed job keeps each key's state in Redis (no memory://) and has no engine to verify on the driver."""
    keyed = [*BASE, "--partition-by", "graph"]
    refused("--partition-by graph keeps each key's state in Redis, which executors share: give --redis "
            "redis://HOST:PORT/DB", keyed)  # fmt: skip
    path = toml(tmp_path, 'partition_by = "message-key"\nredis = "memory://"\n')
    no_redis = [a for a in BASE if a not in ("--redis", "memory://")]
    refused(f"{path}:1: partition_by message-key keeps each key's state in Redis, which executors share: give "
            "redis redis://HOST:PORT/DB", [*no_redis, "--config", path])  # fmt: skip
    refused("FLUXMAT_PARTITION_BY graph keeps each key's state in Redis, which executors share: give FLUXMAT_REDIS",
            no_redis, {"FLUXMAT_PARTITION_BY": "graph", "FLUXMAT_REDIS": "memory://"})  # fmt: skip
    redis = ["--redis", "redis://127.0.0.1:1/0"]
    refused("--verify-every is not available with --partition-by (no engine on the driver)",
            [*keyed, *redis, "--verify-every", "3"])  # fmt: skip
    refused("FLUXMAT_VERIFY_EVERY is not available with --partition-by",
            [*keyed, *redis], {"FLUXMAT_VERIFY_EVERY": "3"})  # fmt: skip
    with pytest.raises(FluxmatError, match="--partition-by message-key keeps each key's state in Redis"):
        JobConfig(**REQUIRED, partition_by="message-key")
    assert cfg_of([*keyed, *redis]).keyed


@pytest.mark.parametrize("name, text, expected", [
    ("budget", "-1", "--budget must be at least 0, got -1"),
    ("budget", "lots", "--budget expects a whole number, got 'lots'"),
    ("max_facts", "-5", "--max-facts must be at least 0 (0: no limit), got -5"),
    ("redis_cluster", "maybe", "FLUXMAT_REDIS_CLUSTER expects yes or no, got 'maybe'"),
    ("algorithm", "remat", "--algorithm must be a fully dynamic algorithm (fd-counting or fd-dred), got 'remat'"),
    ("starting_offsets", '{"0": -1}', "--starting-offsets expects earliest, latest or a JSON object"),
    ("dashboard_port", "70000", "--dashboard-port must be a port number from 0 to 65535, got 70000"),
    ("dead_letter_topic", "a/b", "--dead-letter-topic must be a Kafka topic name"),
])  # fmt: skip
def test_the_other_checks_name_the_flag_or_variable(name, text, expected):
    if expected.startswith("FLUXMAT_"):
        refused(expected, BASE, {f"FLUXMAT_{name.upper()}": text})
    else:
        refused(expected, [*BASE, "--" + name.replace("_", "-"), text])


def test_the_engine_options_come_from_the_settings():
    cfg = cfg_of([*BASE, "--algorithm", "fd-dred", "--budget", "0", "--max-facts", "0", "--max-update-work", "9"])
    assert (cfg.engine.algorithm, cfg.engine.budget, cfg.engine.schedule) == ("fd-dred", 0, "interleaved")
    assert (cfg.engine.limits.facts, cfg.engine.limits.work) == (None, 9)  # 0: no limit
    assert cfg.engine.equality == "off"
    assert cfg_of([*BASE, "--core", "arrays", "--equality", "rewrite"]).engine.equality == "rewrite"
    assert cfg_of([*BASE, "--core", "arrays"], {"FLUXMAT_EQUALITY": "rewrite"}).engine.equality == "rewrite"


def test_equality_needs_the_arrays_core_and_no_partition_by(tmp_path):
    assert cfg_of([*BASE, "--equality", "rewrite"]).equality == "rewrite"  # the default core is arrays
    refused("--equality rewrite needs --core arrays", [*BASE, "--core", "objects", "--equality", "rewrite"])
    refused("FLUXMAT_EQUALITY rewrite needs FLUXMAT_CORE arrays", BASE, {"FLUXMAT_EQUALITY": "rewrite", "FLUXMAT_CORE": "objects"})
    path = toml(tmp_path, 'equality = "rewrite"\ncore = "objects"\n')
    refused(f"{path}:1: equality rewrite needs core arrays", [*BASE, "--config", path])
    keyed = [*BASE, "--core", "arrays", "--redis", "redis://127.0.0.1:1/0", "--partition-by", "graph"]
    refused("--equality rewrite is not available with --partition-by yet", [*keyed, "--equality", "rewrite"])
    refused("--equality must be one of off, rewrite, got 'on'", [*BASE, "--equality", "on"])


def print_config(argv: list[str], monkeypatch, environ: dict | None = None) -> str:
    """What `fluxmat run ARGV --print-config` writes, in the environment `environ`."""
    for key in [k for k in __import__("os").environ if k.startswith("FLUXMAT_")]:
        monkeypatch.delenv(key)
    for key, value in (environ or {}).items():
        monkeypatch.setenv(key, value)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*argv, "--print-config"]) == 0
    return out.getvalue()


def test_print_config_reads_back_to_the_same_job_config(tmp_path, monkeypatch, kafka_file):
    values = samples(kafka_file)
    env = {"FLUXMAT_REDIS_TIMEOUT": "0.5", "FLUXMAT_FACTS": "e1.dl:e2.dl", "FLUXMAT_REDIS_CLUSTER": "yes"}
    argv = ["run", "q.dl", "--bootstrap-servers", "k:9092", "--updates-topic", "up", "--deltas-topic", "down",
            "--redis", values["redis"], "--checkpoint", "/tmp/ck", "--max-facts", "0", "--stall-seconds", "inf",
            "--namespace", 'quote" back\\slash \u00e9\u007f', "--kafka-config", kafka_file,
            "--starting-offsets", values["starting_offsets"], "--trigger-interval", "1 minute"]  # fmt: skip
    expected = cfg_of(argv, env)
    text = print_config(argv, monkeypatch, env)
    path = toml(tmp_path, text)
    assert cfg_of(["run", "--config", path]) == expected
    everything = print_config(["run", "--config", toml(tmp_path, "".join(
        f"{k} = {toml_value(v)}\n" for k, v in values.items() if k != "auth_token"), "all.toml")], monkeypatch)
    assert cfg_of(["run", "--config", toml(tmp_path, everything, "again.toml")]) == JobConfig(
        **{**values, "auth_token": None})  # fmt: skip


def test_print_config_shows_no_secret_and_marks_what_is_missing(monkeypatch):
    text = print_config(["run", "--redis", "redis://:hunter2@127.0.0.1:6379/0"], monkeypatch,
                        {"FLUXMAT_AUTH_TOKEN": "s3cret"})  # fmt: skip
    assert "hunter2" not in text and "s3cret" not in text
    assert "# redis is set but not shown (it holds a secret): give it as FLUXMAT_REDIS" in text
    assert "# auth_token is set but not shown (it holds a secret): give it as FLUXMAT_AUTH_TOKEN" in text
    assert "# checkpoint is required: set it here, as --checkpoint or as FLUXMAT_CHECKPOINT" in text
    assert "\nredis_timeout = 120.0\n" in text and "\ntrigger_interval = \"500ms\"\n" in text


def test_print_config_refuses_a_bad_value(monkeypatch, capsys):
    for key in [k for k in __import__("os").environ if k.startswith("FLUXMAT_")]:
        monkeypatch.delenv(key)
    assert main(["run", "--trigger-interval", "soon", "--print-config"]) == 1
    assert "fluxmat: error: --trigger-interval expects a duration" in capsys.readouterr().err


def test_help_names_each_variable_and_default():
    text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    flat = " ".join(text.split())
    for s in SETTINGS.values():
        if s.name != "program":
            assert s.flag in flat and s.env in flat, s.name
    assert "(env FLUXMAT_REDIS_TIMEOUT; default: 120.0)" in flat
    assert "(required; env FLUXMAT_BOOTSTRAP_SERVERS)" in flat


def test_fluxmat_run_reads_the_file_and_reports_a_bad_one_in_one_line(tmp_path):
    """The real command: the file's settings reach the job (it tries the file's broker), a bad file is one line."""
    import subprocess
    import sys

    program = tmp_path / "p.dl"
    program.write_text("p(X) :- q(X).\n", encoding="utf-8")
    good = toml(tmp_path, f"program = {toml_value(str(program))}\ncheckpoint = {toml_value(str(tmp_path / 'cp'))}\n"
                "bootstrap_servers = '127.0.0.1:1'\nupdates_topic = 'u'\ndeltas_topic = 'd'\nredis = 'memory://'\n")
    bad = toml(tmp_path, "[job]\nbudget = 3\n", "bad.toml")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("FLUXMAT_")}
    for path, line in ((good, "fluxmat: error: cannot reach Kafka broker at 127.0.0.1:1"),
                       (bad, f"fluxmat: error: {bad}:1: unknown key 'job' (the nearest setting: 'core'; settings "
                             "are keys at the top of the file, not in tables)")):
        out = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "run", "--config", path],
                             capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1 and len(lines) == 1 and lines[0].startswith(line), out.stderr
