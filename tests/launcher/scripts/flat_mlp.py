"""A training script without an `if __name__ == "__main__":` guard, as the README's snippets
are written: a fit of a small MLP, then its first weight saved to the file named by --out."""

import argparse
import sys

import numpy as np
from flexflow.core import *

from tiny_data import compiled_mlp, samples

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--out", required=True)
path = parser.parse_known_args()[0].out
print("training starts", flush=True)
ffconfig = FFConfig()
ffmodel, x = compiled_mlp(ffconfig, 0.1)
xs, ys = samples(ffconfig.batch_size * 6)
ffmodel.fit(x=ffmodel.create_data_loader(x, xs),
            y=ffmodel.create_data_loader(ffmodel.label_tensor, ys), epochs=2)
np.save(path, ffmodel.get_layer_by_id(0).get_parameter_by_id(0).get_weights(ffmodel))
print("training ends", file=sys.stderr, flush=True)
