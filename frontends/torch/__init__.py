"""flexflow.torch: PyTorch models into FlexFlow, through torch.fx.

`flexflow.torch.model.PyTorchModel` (r21.x and r22.07 forms), `flexflow.torch.fx` (r20.12-r21.09
export functions), `flexflow.torch.nn` (torch.nn re-exports). See model.py for the API and
README.md in this folder for the file formats and what is supported.
"""
