"""What one fused group sends one device (`Parcel`), and how it travels: as one pickle, its
host arrays out of band, on a connection that carries host memory only (TCP, TLS); and with
its device arrays (CuPy's, anything with `__cuda_array_interface__`) as CUDA buffers of their
own where the connection carries device memory (UCX: Dask offers the "cuda" family of
serializers first there), so that no array sent between GPUs is copied through the host. A
pickled CuPy array is copied to the host (`ndarray.__reduce__`), which is what a host-only
connection must do anyway.

Why one pickle: Dask serialises a list item by item and field by field, which took
milliseconds for a few dozen small gradients.
"""

from __future__ import annotations

import io
import pickle

from distributed.protocol.cuda import cuda_deserialize, cuda_dumps, cuda_loads, cuda_serialize


class Parcel:
    """The messages (scheduler/messages.py) one group sends one device in one iteration."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items


def on_device(value) -> bool:
    """Whether `value` is an array in a GPU's memory."""
    return hasattr(type(value), "__cuda_array_interface__")


class _Pickler(pickle.Pickler):
    """Pickles everything but device arrays, which it sets aside (`device`) by position."""

    def __init__(self, file, buffer_callback):
        super().__init__(file, protocol=5, buffer_callback=buffer_callback)
        self.device: list = []

    def persistent_id(self, obj):
        if on_device(obj):
            self.device.append(obj)
            return len(self.device) - 1
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, buffers, device: list):
        super().__init__(file, buffers=buffers)
        self.device = device

    def persistent_load(self, pid):
        return self.device[pid]


@cuda_serialize.register(Parcel)
def _parcel_to_cuda_frames(parcel: Parcel):
    """Frames: the pickle, its host buffers, then each device array's CUDA frames."""
    host: list = []
    file = io.BytesIO()
    pickler = _Pickler(file, lambda buffer: host.append(buffer.raw()))
    pickler.dump(parcel.items)
    frames = [file.getvalue(), *host]
    devices = []
    for array in pickler.device:
        header, array_frames = cuda_dumps(array)
        devices.append((header, len(array_frames)))
        frames += array_frames
    return {"host_frames": 1 + len(host), "devices": devices}, frames


@cuda_deserialize.register(Parcel)
def _parcel_from_cuda_frames(header, frames) -> Parcel:
    count = header["host_frames"]
    device, start = [], count
    for array_header, length in header["devices"]:
        device.append(cuda_loads(array_header, frames[start:start + length]))
        start += length
    items = _Unpickler(io.BytesIO(frames[0]), frames[1:count], device).load()
    return Parcel(items)
