"""flexflow.keras: FlexFlow's Keras front end (channels-first Keras 2 API) on top of FFModel.

Models and layers are symbolic until `compile`, which builds an FFModel; fit/evaluate/predict
then feed it one batch of FlexFlow's fixed batch size (`-b`) at a time.
"""

from . import (backend, callbacks, datasets, initializers, layers, losses, metrics, models,
               optimizers, preprocessing, utils)

__all__ = ["backend", "callbacks", "datasets", "initializers", "layers", "losses", "metrics",
           "models", "optimizers", "preprocessing", "utils"]
