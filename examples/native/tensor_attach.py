"""Host memory attached to a tensor: attach_numpy_array backs an (8, 3, 10, 10) input tensor with
a numpy array; inline_map / get_array give a writable view of it, whose edits the attached
array sees; inline_unmap and detach_numpy_array release it.

Flags: FFConfig's (none matter here).
"""

from flexflow.core import *

DIMS = [8, 3, 10, 10]


def top_level_task():
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)
    input_tensor = ffmodel.create_tensor(DIMS, DataType.DT_FLOAT)

    np_array = np.arange(np.prod(DIMS), dtype=np.float32).reshape(DIMS)
    input_tensor.attach_numpy_array(ffconfig, np_array)
    print(f"attached a numpy array of shape {np_array.shape} to {input_tensor}")

    input_tensor.inline_map(ffconfig)
    array = input_tensor.get_array(ffconfig, DataType.DT_FLOAT)
    assert array.shape == tuple(DIMS) and np.array_equal(array, np_array), \
        "the mapped tensor does not hold the attached data"
    print(f"mapped: shape {array.shape}, sum {array.sum():.1f}")
    array[0, 0, 0, :] = -1.0
    input_tensor.inline_unmap(ffconfig)
    assert np.all(np_array[0, 0, 0, :] == -1.0), \
        "an edit through the mapping did not reach the attached array"
    print(f"after editing the mapped view: attached array sum {np_array.sum():.1f}")

    input_tensor.detach_numpy_array(ffconfig)
    print("detached")


if __name__ == "__main__":
    print("tensor attach")
    top_level_task()
