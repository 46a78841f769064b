"""The trainer's configuration: `TrainConfig` (`scalerl.trainer.config.train`), its presets, data sections and docs."""
