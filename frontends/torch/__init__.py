"""flexflow.torch: PyTorch models into FlexFlow, through torch.fx.

`flexflow.torch.model.PyTorchModel` (r21.x and r22.07 forms), `flexflow.torch.fx` (r20.12-r21.09
export functions), `flexflow.torch.nn` (torch.nn re-exports). The path of a model: export.py
(torch.fx graph -> IR nodes and weights, with modules.py and functions.py), ir.py (the IR and the
`.ff` text formats), weights.py (the `.npz` weights), builder.py (IR -> FFModel layers).
"""
