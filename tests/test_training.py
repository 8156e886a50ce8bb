"""Training infrastructure: configs, metrics log, progress, checkpoints, exact resume, sharding.

The toy trainer is noisy linear regression with an equinox MLP (a non-array leaf: its
activation function), optax adam, a PRNG key used by every step and a weakly typed scalar, so
every kind of state leaf goes through a checkpoint.
"""

import dataclasses
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gsched.infra.checkpoint import (
    Checkpointer,
    CheckpointError,
    load_checkpoint,
    read_checkpoint_metadata,
    save_checkpoint,
)
from gsched.infra.config import (
    ConfigError,
    config_from_dict,
    config_to_dict,
    load_config,
    parse_run_arguments,
)
from gsched.infra.distributed import data_mesh, shard_batch
from gsched.infra.progress import MetricsLog, Progress, read_jsonl, read_metrics
from gsched.infra.train_loop import run_training
from tests.graphs import subprocess_env

OPTIM = optax.adam(0.05)
TRACES = []


def toy_state(width=4, seed=0):
    model = eqx.nn.MLP(3, 1, width, depth=1, key=jax.random.key(seed))
    return {"model": model, "opt": OPTIM.init(eqx.filter(model, eqx.is_array)),
            "key": jax.random.key(seed + 1), "step": jnp.zeros((), jnp.int32),
            "scale": jnp.asarray(1.0)}


@eqx.filter_jit
def toy_step(state, batch):
    TRACES.append(1)
    key, noise_key = jax.random.split(state["key"])

    def loss_fn(model):
        noisy = batch["x"] + 0.01 * jax.random.normal(noise_key, batch["x"].shape)
        pred = jax.vmap(model)(noisy)[:, 0] * state["scale"]
        return jnp.mean((pred - batch["y"]) ** 2)

    loss, grads = eqx.filter_value_and_grad(loss_fn)(state["model"])
    updates, opt = OPTIM.update(grads, state["opt"], eqx.filter(state["model"], eqx.is_array))
    model = eqx.apply_updates(state["model"], updates)
    new = dict(state, model=model, opt=opt, key=key, step=state["step"] + 1)
    return new, {"loss": loss, "grad_norm": optax.tree.norm(grads)}


def toy_batch(step, size=8):
    key = jax.random.fold_in(jax.random.key(42), step)
    x = jax.random.normal(key, (size, 3))
    return {"x": x, "y": x @ jnp.array([1.0, -2.0, 0.5])}


def arrays(state):
    return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype,
                                                                        jax.dtypes.prng_key)
                       else x) for x in jax.tree.leaves(eqx.filter(state, eqx.is_array))]


def placement(state):
    """What a jitted step's cache sees of each array leaf."""
    return [(type(x), x.dtype, x.shape, getattr(x, "weak_type", None), x.committed)
            for x in jax.tree.leaves(eqx.filter(state, eqx.is_array))]


def assert_same_state(a, b):
    la, lb = arrays(a), arrays(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(x, y)


def train(run_dir, steps, **kw):
    kw.setdefault("checkpoint_every", 3)
    kw.setdefault("log_every", 2)
    kw.setdefault("progress", False)
    return run_training(toy_state(), toy_step, toy_batch, steps=steps, run_dir=run_dir, **kw)


def lines(run_dir):
    """The metrics log without the wall-clock fields."""
    return [{k: v for k, v in r.items() if k not in ("time", "elapsed")}
            for r in read_metrics(Path(run_dir) / "metrics.jsonl")]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted 10-step run: (final state, metrics lines)."""
    run_dir = tmp_path_factory.mktemp("ref")
    state = train(run_dir, 10)
    return state, lines(run_dir)


# ---------------------------------------------------------------------------------- resume

def test_uninterrupted_run_logs_every_step_once(reference):
    state, log = reference
    assert int(state["step"]) == 10
    # log_every=2, checkpoint_every=3, end at 10: lines at 2, 3, 4, 6, 8, 9, 10
    assert [r["step"] for r in log] == [2, 3, 4, 6, 8, 9, 10]
    assert all(set(r) == {"step", "loss", "grad_norm"} for r in log)


def test_resume_after_stop_is_bit_identical(tmp_path, reference):
    first = train(tmp_path, 6)
    assert int(first["step"]) == 6
    TRACES.clear()
    resumed = train(tmp_path, 10, resume=True)
    assert_same_state(resumed, reference[0])
    assert lines(tmp_path) == reference[1]
    assert len(TRACES) == 0                 # the restored state hits the same compiled step
    assert placement(resumed) == placement(reference[0]) == placement(toy_state())
    assert read_checkpoint_metadata(tmp_path / "checkpoints")["step"] == 10


def test_interrupt_saves_and_resumes_exactly(tmp_path, reference, capsys):
    def interrupted(step):
        if step == 7:
            raise KeyboardInterrupt
        return toy_batch(step)

    with pytest.raises(KeyboardInterrupt):
        run_training(toy_state(), toy_step, interrupted, steps=10, run_dir=tmp_path,
                     checkpoint_every=3, log_every=2, progress=False)
    assert "checkpoint saved at step 7" in capsys.readouterr().err
    ckpt = Checkpointer(tmp_path)
    assert ckpt.latest_step() == 7
    ckpt.close()
    assert [r["step"] for r in lines(tmp_path)] == [2, 3, 4, 6, 7]   # step 7 flushed once
    resumed = train(tmp_path, 10, resume=True)
    assert_same_state(resumed, reference[0])
    log = lines(tmp_path)
    assert [r["step"] for r in log] == [2, 3, 4, 6, 7, 8, 9, 10]
    assert log[:4] == reference[1][:4] and log[-1] == reference[1][-1]


def test_exception_in_train_step_saves_then_reraises(tmp_path):
    def failing(state, batch):
        if int(state["step"]) == 4:
            raise RuntimeError("boom")
        return toy_step(state, batch)

    with pytest.raises(RuntimeError, match="boom"):
        run_training(toy_state(), failing, toy_batch, steps=10, run_dir=tmp_path,
                     checkpoint_every=3, progress=False)
    ckpt = Checkpointer(tmp_path)
    state, meta = ckpt.restore(toy_state())
    ckpt.close()
    assert meta["step"] == 4 and int(state["step"]) == 4


def test_resume_after_crash_drops_lines_past_the_checkpoint(tmp_path, reference):
    """A session killed after its checkpoint at 9 had logged step 10 and half a line."""
    train(tmp_path, 10)
    shutil.rmtree(tmp_path / "checkpoints" / "10")       # as if never written
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 11, "lo')
    resumed = train(tmp_path, 10, resume=True)
    assert_same_state(resumed, reference[0])
    assert lines(tmp_path) == reference[1]


def test_keeps_the_last_checkpoints(tmp_path):
    train(tmp_path, 10, checkpoint_every=2, keep=2)
    assert sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir()) == [8, 10]
    ckpt = Checkpointer(tmp_path)
    state, meta = ckpt.restore(toy_state(), step=8)
    ckpt.close()
    assert meta["step"] == int(state["step"]) == 8


def test_run_directory_guards(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint to resume"):
        train(tmp_path, 3, resume=True)
    def no_batch(step):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):           # stopped before any step: nothing saved
        run_training(toy_state(), toy_step, no_batch, steps=3, run_dir=tmp_path,
                     checkpoint_every=1, progress=False)
    train(tmp_path, 3)
    with pytest.raises(CheckpointError, match="previous run"):
        train(tmp_path, 3)
    (tmp_path / "notes.txt").write_text("mine")
    state = train(tmp_path, 2, overwrite=True)
    assert int(state["step"]) == 2 and (tmp_path / "notes.txt").read_text() == "mine"
    assert [r["step"] for r in lines(tmp_path)] == [2]
    with pytest.raises(ValueError, match="past steps=1"):
        train(tmp_path, 1, resume=True)
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        train(tmp_path / "other", 3, checkpoint_every=0)


# ------------------------------------------------------------------------------ validation

@pytest.mark.parametrize("higher, best_step", [(True, 4), (False, 2)])
def test_best_checkpoint_tracks_validation(tmp_path, higher, best_step):
    scripted = {1: 3.0, 2: 1.0, 3: 4.0, 4: 5.0, 5: float("nan"), 6: 5.0}   # ties never win

    def validate(state):
        step = int(state["step"])
        return {"score": scripted[step], "other": -step}

    train(tmp_path, 6, validate=validate, validate_every=1, higher_is_better=higher,
          best_key="score")
    best = read_checkpoint_metadata(tmp_path / "best")
    assert (best["step"], best["best_step"]) == (best_step, best_step)
    assert best["best_value"] == scripted[best_step]
    assert len(list((tmp_path / "best").iterdir())) == 1               # rotated
    state, meta = load_checkpoint(tmp_path, toy_state())                # run dir → best
    assert int(state["step"]) == best_step and meta["step"] == best_step
    assert [r["val/other"] for r in lines(tmp_path)] == [-1, -2, -3, -4, -5, -6]
    last = read_checkpoint_metadata(tmp_path / "checkpoints")
    assert (last["best_value"], last["best_step"]) == (scripted[best_step], best_step)


def test_best_survives_resume(tmp_path):
    values = {3: 2.0, 6: 1.0, 9: 3.0, 10: 0.5}
    validate = lambda state: values[int(state["step"])]   # noqa: E731
    train(tmp_path, 6, validate=validate, higher_is_better=True)
    train(tmp_path, 10, validate=validate, higher_is_better=True, resume=True)
    best = read_checkpoint_metadata(tmp_path / "best")
    assert (best["best_value"], best["step"]) == (3.0, 9)
    assert sorted(p.name for p in (tmp_path / "best").iterdir()) == ["2"]  # 2nd improvement


def test_resuming_with_another_best_key_ranks_afresh(tmp_path, capsys):
    def validate(state):
        step = int(state["step"])
        return {"a": {3: 1.0, 6: 2.0, 9: 9.0}[step], "b": {3: 5.0, 6: 4.0, 9: 3.0}[step]}

    train(tmp_path, 6, validate=validate, best_key="a", higher_is_better=False)
    assert read_checkpoint_metadata(tmp_path / "best")["best_value"] == 1.0  # a, step 3
    train(tmp_path, 9, validate=validate, best_key="b", higher_is_better=False, resume=True)
    assert "ranked by 'a', this run ranks by 'b'" in capsys.readouterr().err
    best = read_checkpoint_metadata(tmp_path / "best")  # b's 3.0 (step 9), not vs a's 1.0
    assert (best["best_value"], best["step"], best["best_key"]) == (3.0, 9, "b")


def test_validation_value_errors(tmp_path):
    with pytest.raises(ValueError, match="pass best_key"):
        train(tmp_path / "a", 3, validate=lambda s: {"a": 1.0, "b": 2.0})
    with pytest.raises(ValueError, match="best_key 'c'"):
        train(tmp_path / "b", 3, validate=lambda s: {"a": 1.0}, best_key="c")
    with pytest.raises(ValueError, match="must be a scalar"):
        train(tmp_path / "c", 3, validate=lambda s: jnp.ones(2))


# ----------------------------------------------------------------------------- checkpoints

def test_checkpoint_errors_name_path_and_problem(tmp_path):
    train(tmp_path, 3)
    step_dir = tmp_path / "checkpoints" / "3"
    with pytest.raises(CheckpointError, match=re.escape(
            f"{step_dir}: leaf ['model'].layers[0].weight is float32[4, 3] in the checkpoint "
            f"but the template has ['model'].layers[0].weight float32[5, 3]")):
        load_checkpoint(step_dir, toy_state(width=5))
    other = toy_state()
    other["extra"] = jnp.zeros(2)
    with pytest.raises(CheckpointError, match="array leaves"):
        load_checkpoint(step_dir, other)
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        load_checkpoint(tmp_path / "missing", toy_state())

    broken = tmp_path / "broken"
    shutil.copytree(step_dir, broken)
    for f in (broken / "state").rglob("*"):
        if f.is_file() and "ocdbt" in str(f.relative_to(broken)):
            f.write_bytes(f.read_bytes()[:5])                            # truncated
    with pytest.raises(CheckpointError, match=re.escape(f"{broken}: cannot restore")):
        load_checkpoint(broken, toy_state())

    (step_dir / "meta" / "metadata").write_text('{"step": 3, "lea')     # corrupt latest
    with pytest.raises(CheckpointError, match=re.escape(
            f"{step_dir}: unreadable checkpoint metadata")):
        train(tmp_path, 6, resume=True)                                  # no silent fallback
    (step_dir / "meta" / "metadata").unlink()
    with pytest.raises(CheckpointError, match="unreadable checkpoint metadata"):
        load_checkpoint(step_dir, toy_state())
    shutil.rmtree(step_dir / "meta")
    with pytest.raises(CheckpointError, match="not a complete gsched checkpoint"):
        load_checkpoint(step_dir, toy_state())
    (step_dir / "meta").mkdir()
    (step_dir / "meta" / "metadata").write_text('{"step": 3}')        # not ours
    with pytest.raises(CheckpointError, match="not that of a gsched checkpoint"):
        load_checkpoint(step_dir, toy_state())


def test_save_checkpoint_export_round_trip(tmp_path):
    state = toy_state(seed=3)
    save_checkpoint(tmp_path / "export", state, {"config": {"width": 4}})
    with pytest.raises(CheckpointError, match="already exists"):
        save_checkpoint(tmp_path / "export", state, {})
    restored, meta = load_checkpoint(tmp_path / "export", toy_state(seed=9))
    assert_same_state(restored, state)
    assert meta["config"] == {"width": 4}
    assert restored["scale"].weak_type and restored["model"].activation is jax.nn.relu


# ------------------------------------------------------------------------- log and progress

def test_metrics_log_truncation_and_errors(tmp_path):
    path = tmp_path / "m.jsonl"
    log = MetricsLog(path)
    for step in (1, 2, 3):
        log.write({"step": step, "loss": step / 2})
    MetricsLog(path, resume_step=2).write({"step": 3, "loss": 9.0})
    assert [(r["step"], r["loss"]) for r in read_metrics(path)] == [(1, .5), (2, 1.0), (3, 9.0)]
    path.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match=r"m.jsonl:2: not a JSON line"):
        MetricsLog(path, resume_step=5)
    path.write_text('{"step": 1}\n{"loss": 2}\n')
    with pytest.raises(ValueError, match="a line has no integer 'step'"):
        MetricsLog(path, resume_step=5)
    path.write_text('{"step": 1}\n{"step": 2, "lo')  # cut short mid-write: dropped on resume
    MetricsLog(path, resume_step=5)
    assert path.read_text() == '{"step": 1}\n'


def test_read_jsonl_is_the_one_reader(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3')
    warnings = []
    assert read_jsonl(path, warn=warnings.append) == [{"a": 1}, {"a": 2}]
    assert len(warnings) == 1 and "partial last line" in warnings[0]
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')  # a corrupt line that is not the last
    with pytest.raises(ValueError, match=r"rows.jsonl:2: not a JSON line"):
        read_jsonl(path)
    path.write_text('[1, 2]\n')
    with pytest.raises(ValueError, match=r"rows.jsonl:1: not a JSON object"):
        read_jsonl(path)


def test_progress_line(tmp_path):
    stream = io.StringIO()
    bar = Progress(100, stream=stream)
    line = bar.report(25, {"reward": -3.25, "baseline_loss": 0.125}, best=(1.5, 20))
    assert stream.getvalue() == line + "\n"
    for part in ("step 25/100", "reward -3.25", "baseline_loss 0.125", "steps/s", "elapsed 0:00:0",
                 "ETA ", "best 1.5 @ 20"):
        assert part in line, (part, line)
    assert Progress(10, stream=None).report(5, {}) .startswith("step 5/10")

    stream = io.StringIO()
    train(tmp_path, 4, progress=stream, log_every=2, validate=lambda s: 1.0,
          validate_every=4)
    printed = stream.getvalue().splitlines()
    assert [p.split(" |")[0] for p in printed] == ["step 2/4", "step 4/4"]
    assert "val 1" in printed[-1] and "best 1 @ 4" in printed[-1]


def test_quiet_run_prints_nothing(tmp_path, capsys):
    train(tmp_path, 3, progress=False)
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------------------------- configs

@dataclasses.dataclass(frozen=True)
class Optim:
    lr: float = 1e-3
    schedule: Literal["constant", "cosine"] = "constant"


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int
    name: str = "run"
    hidden: tuple[int, ...] = (32, 32)
    clip: float | None = None
    amp: bool = False
    optim: Optim = Optim()

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps must be ≥ 1, got {self.steps}")


def test_load_config_and_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('steps = 100\nhidden = [8, 16]\n[optim]\nlr = 1\nschedule = "cosine"\n')
    config = load_config(path, Config)
    assert config == Config(steps=100, hidden=(8, 16), optim=Optim(lr=1.0, schedule="cosine"))
    assert isinstance(config.optim.lr, float)
    config = load_config(path, Config, ["steps=200", "optim.lr=3e-4", "name=7", "clip=0.5",
                                        "amp=true", "hidden=[4]"])
    assert config == Config(steps=200, name="7", hidden=(4,), clip=0.5, amp=True,
                            optim=Optim(lr=3e-4, schedule="cosine"))
    assert config_from_dict(Config, json.loads(json.dumps(config_to_dict(config)))) == config
    assert config_to_dict(config)["optim"] == {"lr": 3e-4, "schedule": "cosine"}


@pytest.mark.parametrize("text, overrides, message", [
    ("steps = 1\nstep = 2\n", (), r"c\.toml: unknown key 'step'"),
    ("steps = 1\n[optim]\nlrr = 2\n", (), r"c\.toml: unknown key 'optim\.lrr'"),
    ('steps = "many"\n', (), r"c\.toml: key 'steps': expected int, got str 'many'"),
    ("steps = 1.5\n", (), "key 'steps': expected int"),
    ("steps = true\n", (), "key 'steps': expected int, got bool"),
    ("steps = 1\namp = 1\n", (), "key 'amp': expected bool"),
    ('steps = 1\n[optim]\nschedule = "linear"\n', (), "key 'optim.schedule': expected one of"),
    ('steps = 1\nhidden = [1, "a"]\n', (), r"key 'hidden\[1\]': expected int"),
    ("steps = 1\noptim = 3\n", (), "key 'optim': expected a table"),
    ("name = 'x'\n", (), "missing required key 'steps'"),
    ("steps = 0\n", (), "steps must be ≥ 1"),
    ("steps = = 1\n", (), r"c\.toml: invalid TOML"),
    ("steps = 1\n", ("optim.lrr=1",), r"override 'optim.lrr=1': unknown key 'optim\.lrr'"),
    ("steps = 1\n", ("steps=abc",), r"override 'steps=abc': key 'steps': expected int"),
    ("steps = 1\n", ("steps",), "expected KEY=VALUE"),
    ("steps = 1\n", ("steps.x=1",), "'steps' is not a table"),
])
def test_config_errors(tmp_path, text, overrides, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, Config, overrides)


def test_config_saved_with_the_run(tmp_path):
    config = Config(steps=3, optim=Optim(lr=0.5))
    train(tmp_path, 3, config=config)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved == config_to_dict(config)
    assert config_from_dict(Config, read_checkpoint_metadata(tmp_path)["config"]) == config


# --------------------------------------------------------------------------------- sharding

def test_shard_batch_on_one_device():
    mesh = data_mesh()
    assert mesh.axis_names == ("data",) and mesh.size == len(jax.local_devices())
    batch = shard_batch({"x": np.ones((4, 2)), "n": 3}, mesh)
    assert batch["n"] == 3 and batch["x"].sharding.mesh == mesh
    with pytest.raises(ValueError, match="leading batch axis"):
        shard_batch({"x": jnp.ones(())}, mesh)


def test_steps_and_validations_run_under_the_mesh(tmp_path):
    # So that the cost model's batch evaluations inside them split over the mesh's devices
    # (evaluate_batch under jax.set_mesh), one schedule loop per device.
    seen = []

    def step(state, batch):
        seen.append(jax.sharding.get_abstract_mesh().axis_names)
        return toy_step(state, batch)

    def validate(state):
        seen.append(jax.sharding.get_abstract_mesh().axis_names)
        return 0.0

    run_training(toy_state(), step, toy_batch, steps=2, run_dir=tmp_path, checkpoint_every=2,
                 validate=validate, progress=False, mesh=data_mesh())
    assert seen == [("data",)] * 3  # two steps, one validation
    assert jax.sharding.get_abstract_mesh().empty  # and only there


SHARDED = """
import sys, tempfile, jax, numpy as np
import tests.test_training as t
from gsched.infra.distributed import data_mesh, shard_batch
from gsched.infra.train_loop import run_training
assert len(jax.devices()) == 2, jax.devices()
mesh = data_mesh()
try:
    shard_batch({"x": np.ones((3, 2))}, mesh)
    raise SystemExit("no error")
except ValueError as err:
    assert "batch size 3 is not divisible by the 2 devices" in str(err), err
batch = shard_batch(t.toy_batch(0), mesh)
assert batch["x"].addressable_shards[0].data.shape == (4, 3)
kw = dict(checkpoint_every=5, progress=False, mesh=mesh)
with tempfile.TemporaryDirectory() as run_dir:
    run_training(t.toy_state(), t.toy_step, t.toy_batch, steps=5, run_dir=run_dir, **kw)
    state = run_training(t.toy_state(), t.toy_step, t.toy_batch, steps=10, run_dir=run_dir,
                         resume=True, **kw)
for x in jax.tree.leaves(t.eqx.filter(state, t.eqx.is_array)):
    assert x.sharding.is_fully_replicated and len(x.sharding.device_set) == 2, x.sharding
reference = np.load(sys.argv[1])
for i, x in enumerate(t.arrays(state)):
    np.testing.assert_allclose(x, reference[f"a{i}"], rtol=1e-5, atol=1e-6)
print("SHARDED_TRAINING_OK")
"""


@pytest.mark.subprocess
def test_data_parallel_training_on_two_host_devices(tmp_path, reference):
    """Sharded over 2 devices, 5 steps + resume for 5 ≈ the 1-device reference run."""
    np.savez(tmp_path / "ref.npz", **{f"a{i}": x for i, x in enumerate(arrays(reference[0]))})
    env = subprocess_env(2, JAX_PLATFORMS="cpu")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", SHARDED, str(tmp_path / "ref.npz")], cwd=root,
                         env=env, capture_output=True, text=True, timeout=300)
    assert "SHARDED_TRAINING_OK" in out.stdout, out.stderr[-3000:]


def test_parse_run_arguments_defaults_and_bad_keys(tmp_path, capsys):
    @dataclasses.dataclass(frozen=True)
    class Tiny:
        steps: int = 3

    config_file = tmp_path / "tiny_run.toml"
    config_file.write_text("steps = 5\n")
    args, config, run_dir = parse_run_arguments(
        "prog", "doc", Tiny, ["--config", str(config_file), "steps=7", "--resume"])
    assert config == Tiny(steps=7) and args.resume and run_dir == Path("runs/tiny_run")
    with pytest.raises(SystemExit) as exit_info:
        parse_run_arguments("prog", "doc", Tiny, ["--config", str(config_file),
                                                           "stepz=1"])
    assert exit_info.value.code == 2 and "stepz" in capsys.readouterr().err
