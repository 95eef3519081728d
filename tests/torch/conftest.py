import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """PyTorch, the oracle here, runs on one thread: the machine is shared, and threads that
    spin while they wait make everything slower when the cores are oversubscribed."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
