"""docs/configuration.md is generated from the configuration models and matches them."""

from scalerl.trainer.config.docs import DOC, render


def test_the_configuration_reference_matches_the_models():
    assert DOC.read_text() == render(), "the config models changed: run `python -m scalerl.trainer.config.docs`"


def test_every_trainer_default_is_in_the_reference():
    text = render()
    for key in ("`loss.eps_max` | `5.0`", "`pipeline.k` | `8`", "`optim.eps` | `1.0e-15`", "`host` | `127.0.0.1`"):
        assert key in text
