"""The sigmoid is defined once: the trainer's fits are the contract record the dashboard reads back.

`scalerl.env.contracts.sigmoid` holds the record, the curve and its band; the trainer's fitting returns
that record and writes it to `curves/<domain>.json`; nothing else in the project defines the curve.
"""

from __future__ import annotations

import json
import re

import numpy as np
from scalerl.env.contracts import sigmoid as shared
from scalerl.env.contracts.paths import REPO
from scalerl.trainer.fit.sigmoid import fit_sigmoid
from scalerl.trainer.fit.synthetic import CurveSpec


def test_a_fit_round_trips_through_its_json_record():
    spec = CurveSpec(name="t", A=0.7, B=1.6, C_mid=40.0, C_end=120.0, R0=0.1)
    cs = np.linspace(0.0, 120.0, 21)
    fit = fit_sigmoid(cs, spec.truth(cs) + np.random.default_rng(1).normal(0, 0.005, cs.size), a_max=1.0)
    assert type(fit) is shared.SigmoidFit
    back = shared.SigmoidFit.model_validate(json.loads(json.dumps(fit.to_dict())))
    grid = np.geomspace(1.0, 480.0, 50)
    assert np.allclose(back.predict(grid), fit.predict(grid)) and np.allclose(back.band(grid), fit.band(grid))
    assert abs(back.predict(1e9) - back.A) < 1e-6 and back.predict(0.0) == back.R0


def test_no_second_copy_of_the_curve_or_its_parameter_names():
    """The formula's pieces (the gate's tanh form, the parameter tuple) appear only in the shared module."""
    copies = re.compile(r'\(\s*"A",\s*"R0",\s*"B",\s*"C_mid"\s*\)|np\.tanh\(0\.5 \*')
    found = sorted(str(p.relative_to(REPO)) for top in ("scalerl_env", "trainer", "verifiers", "curriculum")
                   for p in (REPO / top).rglob("*.py") if copies.search(p.read_text()))
    assert found == ["scalerl_env/contracts/sigmoid.py"]
