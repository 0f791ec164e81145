"""A study run's id names its resolved settings: two runs share an id exactly when they
would compute the same thing. Every top-level config key that changes a run changes its
id (the id is how a study finds a run it already has, so a key left out of it would
hand back another run's results); equal configs, however written, share one.
"""

from __future__ import annotations

import pytest

from olsctl.config import TOP_LEVEL, build_config
from olsctl.study import load_study
from olsctl.study.grid import run_id

BASE = {"trace": "logs/tiny.swf", "policy": {"name": "easy"}}

#: per top-level key, settings that differ from :data:`BASE` (or from one another) only
#: in that key, and keep the id's readable prefix (log and policy name, ``-ols``), so
#: only the hash can tell them apart
VARIANTS: dict[str, list] = {
    "trace": ["logs/tiny.swf", "other/tiny.swf", "tiny.swf.gz"],
    "procs": [None, 32, 64],
    "active_procs": [None, 0, 16],
    "estimates": ["exact", "user"],
    "load_scale": [1.0, 0.98, 1.02],
    "policy": [{"name": "easy"}, {"name": "easy", "order": "wfp"},
               {"name": "easy", "order": "saf"}],
    "skip_bad_lines": [False, True],
    "sla": [None, {"max": 100}, {"max": 100, "window_s": 86400}, {"metric": "p95_bsld"}],
    "power": [None, {"cap": {"fraction": 0.6}}, {"cap": {"fraction": 0.8}}],
}
CONTROLLER_VARIANTS = [{}, {"interval_s": 600}, {"sla": {"max": 50}},
                       {"sla": {"max": 50, "feedback": True}}, {"search": "bisect"}]

#: ``out`` is where a run goes, not what it computes (a study sets it from the id);
#: ``strict`` only checks the run's decisions
NOT_IN_THE_ID = {"out", "strict"}


def _id(**changes) -> str:
    return run_id(build_config({**BASE, **changes}))


def test_every_top_level_key_is_covered():
    assert set(VARIANTS) | {"controller"} | NOT_IN_THE_ID == set(TOP_LEVEL)


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_changing_a_top_level_key_changes_the_run_id(key):
    ids = [_id(**{key: value}) for value in VARIANTS[key]]
    assert len({i.rsplit("-", 1)[0] for i in ids}) == 1, ids  # the same readable prefix
    assert len(set(ids)) == len(ids), ids


def test_changing_the_controller_changes_the_run_id():
    """With and without a controller the prefix differs (``-ols``); between controllers
    only the hash does."""
    ids = [_id(controller=c) for c in CONTROLLER_VARIANTS]
    assert all(i.startswith("tiny-easy-ols-") for i in ids)
    assert len(set(ids)) == len(ids), ids
    assert _id().startswith("tiny-easy-") and _id() not in ids


def test_equal_configs_share_an_id_however_written():
    """Defaults spelled out or left out, keys in another order, another ``out``: the
    same resolved config, the same id; ``build_config`` called afresh each time."""
    plain = _id()
    assert _id() == plain
    assert run_id(build_config({"policy": {"order": "fcfs", "name": "easy"},
                                "load_scale": 1.0, "estimates": "exact", "procs": None,
                                "trace": "logs/tiny.swf", "out": "elsewhere"})) == plain
    ols = _id(controller={"interval_s": 600, "sla": {"max": 50}})
    assert _id(controller={"sla": {"max": 50}, "interval_s": 600.0}) == ols
    power = _id(power={"cap": {"fraction": 0.6}})
    assert _id(power={"cap": {"fraction": 0.6}}) == power
    # a whole number where a float is meant: the same load, the same run
    assert _id(load_scale=1) == plain
    assert _id(load_scale=2) == _id(load_scale=2.0) != plain


def test_a_study_over_load_scale_has_one_run_per_load(tmp_path):
    """The SLA is judged at loads 0.98, 1.0 and 1.02 (each against EASY at the same
    load): a study over ``load_scale`` has three runs, not one under three names."""
    (tmp_path / "tiny.swf").write_text("; MaxProcs: 4\n"
                                       "1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
    (tmp_path / "s.yaml").write_text("base: {trace: tiny.swf, policy: {name: easy}}\n"
                                     "grid:\n  load_scale: [0.98, 1.0, 1.02]\n"
                                     "  estimates: [exact, user]\n")
    study = load_study(tmp_path / "s.yaml")
    ids = [p.run_id for p in study.points]
    assert len(set(ids)) == len(ids) == 6
    again = load_study(tmp_path / "s.yaml")
    assert [p.run_id for p in again.points] == ids
    for p in study.points:
        assert p.run_id == run_id(build_config({
            "trace": "tiny.swf", "policy": {"name": "easy"},
            "load_scale": p.config.load_scale, "estimates": p.config.estimates},
            base_dir=tmp_path))
