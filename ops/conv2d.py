"""2-D convolution over NCHW tensors, and the sliding-window geometry it shares with pooling.

Where torch is installed the convolution and both its gradients are one ATen call each
(oneDNN on a CPU, cuDNN on a GPU: ops/vendor.py), with the bias and the activation fused as
PyTorch fuses them. The reference kernels below, the fallback, use the im2col formulation: the
input windows are copied into column matrices (one strided copy per kernel offset, never a Python
loop over single samples or channels), so the convolution is a (grouped) matrix product, and so
are both of its weight and input gradients. This keeps the work in BLAS / cuBLAS. The batch goes through in chunks of a few MiB of columns, which
keeps the workspace small and in cache.

Splitting the output by height or width needs a halo: a partition reads the input rows of all its
windows, including rows that belong to its neighbours. `input_box` asks for exactly those rows and
may reach outside the tensor; the caller clips the box, and the kernel pads only what was clipped,
so a border partition applies the layer's padding and an interior partition applies none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from . import vendor
from .activation import (activate, activate_backward, aten_activate, aten_activate_backward,
                         check_activation)
from .base import Operator, Part, activation_kept, expect_float, expect_rank
from .box import Box
from .spec import DimKind, ShapeError, TensorSpec, WeightSpec

Pair = tuple[int, int]
Padding = tuple[Pair, Pair]

# Size of the im2col workspace (bytes): big enough for efficient matrix products, small enough to
# stay in cache between being written and being read.
COLUMN_BYTES = 4 << 20


def check_window_op(op, inputs, what: str) -> None:
    """The checks of a windowed operator (conv2d, pool2d) that need no sizes: one float NCHW
    input, a kernel, stride and padding some input could satisfy, and a known fused activation;
    ShapeError otherwise."""
    expect_rank(inputs, 0, (4,), f"{what} input (NCHW)")
    expect_float(inputs, 0, f"{what} input")
    kernel, stride, padding = op.kernel, op.stride, op.padding
    if len(kernel) != 2 or min(kernel) <= 0:
        raise ShapeError(f"{what} kernel must be two positive sizes, got {kernel}")
    if len(stride) != 2 or min(stride) <= 0:
        raise ShapeError(f"{what} stride must be two positive sizes, got {stride}")
    if len(padding) != 2 or any(len(p) != 2 or min(p) < 0 for p in padding):
        raise ShapeError(f"{what} padding must be ((top, bottom), (left, right)) of non-negative "
                         f"sizes, got {padding}")
    check_activation(op.activation)


def window_output_hw(x: TensorSpec, kernel: Pair, stride: Pair, padding: Padding,
                     what: str) -> Pair:
    """Output height and width of a sliding window over the last two dims of `x`."""
    sizes = []
    for size, k, s, (before, after) in zip(x.shape[2:], kernel, stride, padding):
        if size + before + after < k:
            raise ShapeError(f"{what} input {x.shape} padded by {padding} is smaller than the "
                             f"kernel {kernel}")
        sizes.append((size + before + after - k) // s + 1)
    return sizes[0], sizes[1]


def window_span(out_start: int, out_stop: int, kernel: int, stride: int,
                pad_before: int) -> Pair:
    """The input rows [start, stop) read by output rows [out_start, out_stop), in the
    coordinates of the unpadded input (so they may be negative or past its end)."""
    return out_start * stride - pad_before, (out_stop - 1) * stride - pad_before + kernel


def window_input_box(out_box: Box, kernel: Pair, stride: Pair, padding: Padding) -> Box:
    """`out_box` with its H and W ranges replaced by the input ranges its windows read."""
    box = out_box
    for dim, k, s, (before, _) in zip((2, 3), kernel, stride, padding):
        box = box.replace(dim, *window_span(*out_box.bounds[dim], k, s, before))
    return box


@dataclass(frozen=True)
class Windows:
    """The windows one partition computes, relative to the input array it was handed.

    `edges` holds, for H and W, how many rows/columns to add (positive: padding) or drop
    (negative: input rows no window reads) at the start and end of the given input box.

    The windows are evaluated on a grid of `grid_hw` positions. With stride 1 the grid is as wide
    as the padded input (`wide`): then the elements that one kernel offset reads for a whole
    image are a single contiguous run of the flattened padded input, so gathering them is a
    plain memory copy rather than one short copy per output row. The extra grid columns wrap
    around into the next row; they are computed, cropped away (`crop`) and fed zero gradients
    (`uncrop`). To let the last image's run overhang its end, a wide padded input carries one
    spare image plane.
    """

    kernel: Pair
    stride: Pair
    out_hw: Pair
    edges: tuple[Pair, Pair]
    in_shape: tuple[int, int, int, int]

    @staticmethod
    def of(part: Part, kernel: Pair, stride: Pair, padding: Padding) -> "Windows":
        out_box, in_box = part.out_box, part.in_boxes[0]
        edges = []
        for dim, k, s, (before, _) in zip((2, 3), kernel, stride, padding):
            start, stop = window_span(*out_box.bounds[dim], k, s, before)
            have_start, have_stop = in_box.bounds[dim]
            edges.append((have_start - start, stop - have_stop))
        return Windows(kernel, stride, out_box.shape[2:4], (edges[0], edges[1]), in_box.shape)

    @property
    def wide(self) -> bool:
        return self.stride == (1, 1)

    @property
    def padded_hw(self) -> Pair:
        (top, bottom), (left, right) = self.edges
        return self.in_shape[2] + top + bottom, self.in_shape[3] + left + right

    @property
    def grid_hw(self) -> Pair:
        return self.out_hw[0], self.padded_hw[1] if self.wide else self.out_hw[1]

    def read(self, x):
        """`x` without the input rows and columns no window reads (a view)."""
        (top, bottom), (left, right) = self.edges
        h, w = x.shape[2:]
        return x[:, :, max(-top, 0):h - max(-bottom, 0), max(-left, 0):w - max(-right, 0)]

    def unread(self, grad, zeros: Callable[[], Any]):
        """The inverse of `read` for a gradient: `grad` itself when `read` dropped nothing, else
        placed in `zeros()`, an array of the input's shape."""
        if tuple(grad.shape) == self.in_shape:
            return grad
        (top, _), (left, _) = self.edges
        full = zeros()
        full[:, :, max(-top, 0):max(-top, 0) + grad.shape[2],
             max(-left, 0):max(-left, 0) + grad.shape[3]] = grad
        return full

    def unpadded(self, a):
        """`a`, the size of the padded input, without the padding (a view)."""
        (top, bottom), (left, right) = self.edges
        h, w = a.shape[2:]
        return a[:, :, max(top, 0):h - max(bottom, 0), max(left, 0):w - max(right, 0)]

    def pad(self, xp, x, fill: float):
        """The input with exactly the rows and columns the windows read, in the layout `taps`
        reads (a wide input gets its spare plane); `x` itself when that needs no copy."""
        (top, _), (left, _) = self.edges
        n, c = x.shape[:2]
        x = self.read(x)
        top, left = max(top, 0), max(left, 0)
        if not self.wide and x.shape[2:] == self.padded_hw:
            return x
        padded = self.empty(xp, x.dtype, fill)
        padded[:n * c].reshape(n, c, *self.padded_hw)[:, :, top:top + x.shape[2],
                                                      left:left + x.shape[3]] = x
        return padded

    def empty(self, xp, dtype, fill: float = 0.0):
        """A padded input filled with `fill` (`unpad` turns it into the input's gradient)."""
        n, c = self.in_shape[:2]
        planes = n * c + 1 if self.wide else n * c
        return xp.full((planes,) + self.padded_hw, fill, dtype=dtype)

    def taps(self, padded, start: int = 0,
             stop: int | None = None) -> Iterator[tuple[int, int, Any]]:
        """(i, j, view) per kernel offset: the (samples, c) + grid_hw view of `padded` holding
        the element at offset (i, j) of every window of samples [start, stop). Each view covers
        distinct elements, so a gradient can be accumulated into it in place (`scatter`)."""
        (kh, kw), (sh, sw) = self.kernel, self.stride
        n, c = self.in_shape[:2]
        stop = n if stop is None else stop
        (hp, wp), (ho, wo) = self.padded_hw, self.out_hw
        plane = hp * wp
        for i in range(kh):
            for j in range(kw):
                if self.wide:
                    first = start * c * plane + i * wp + j
                    run = padded.reshape(-1)[first:first + (stop - start) * c * plane]
                    view = run.reshape(-1, plane)[:, :ho * wp].reshape(stop - start, c, ho, wp)
                else:
                    view = padded.reshape(n, c, hp, wp)[
                        start:stop, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
                yield i, j, view

    def scatter(self, tap, grad) -> None:
        """Add `grad` into `tap`, a view from `taps` of a gradient being built; windows that do
        not overlap touch each element at most once, so there it is a cheaper plain store."""
        if all(s >= k for s, k in zip(self.stride, self.kernel)):
            tap[...] = grad
        else:
            tap += grad

    def aten_input(self, aten, x, fill: float, max_padding: Pair | None = None):
        """(tensor, padding, explicit): `x` as a torch tensor of exactly the rows and columns
        the windows read, and the symmetric padding a torch convolution or pooling adds itself.
        Padding it cannot add (uneven, or over `max_padding`) is added here with `fill`, a
        copy (`explicit`); then `padding` is zero."""
        tensor = aten.tensor(self.read(x))
        pads = tuple(tuple(max(edge, 0) for edge in pair) for pair in self.edges)
        (top, bottom), (left, right) = pads
        limit = max_padding or (top, left)
        if self._torch_pads_alike(tensor.shape[2:], pads) and top <= limit[0] and \
                left <= limit[1]:
            return tensor, (top, left), False
        padded = aten.torch.nn.functional.pad(tensor, (left, right, top, bottom), value=fill)
        return padded, (0, 0), True

    def _torch_pads_alike(self, hw: Pair, pads: tuple[Pair, Pair]) -> bool:
        """Whether torch, padding an input of `hw` rows and columns on both sides by the
        leading edges of `pads`, computes exactly these windows: it does when it fits as many
        (a trailing edge narrower than the leading one is then padding no window reads)."""
        return all(after <= before and (size + 2 * before - k) // s + 1 == out
                   for size, (before, after), k, s, out in zip(hw, pads, self.kernel,
                                                               self.stride, self.out_hw))

    def aten_input_grad(self, grad, explicit: bool):
        """The input's gradient from that of `aten_input`'s tensor: the padding added there
        dropped, the input rows and columns no window reads given zeros."""
        if explicit:
            grad = self.unpadded(grad)
        return self.unread(grad, lambda: grad.new_zeros(self.in_shape))

    def crop(self, y):
        """Grid results (last two dims `grid_hw`) cut to the output's width."""
        return y[..., :self.out_hw[1]]

    def uncrop(self, xp, dy):
        """An output gradient laid out on the grid, zero in the columns `crop` drops."""
        if not self.wide or self.grid_hw == self.out_hw:
            return xp.ascontiguousarray(dy)
        grid = xp.empty(dy.shape[:-1] + (self.grid_hw[1],), dtype=dy.dtype)
        grid[..., :self.out_hw[1]] = dy
        grid[..., self.out_hw[1]:] = 0
        return grid

    def unpad(self, xp, padded):
        """The inverse of `pad` for a gradient: drop the padding, restore dropped rows as zeros."""
        n, c = self.in_shape[:2]
        grad = self.unpadded(padded[:n * c].reshape(n, c, *self.padded_hw))
        return self.unread(grad, lambda: xp.zeros(self.in_shape, dtype=padded.dtype))


def _grouped(array, groups: int):
    """A kernel (out, in/groups, kh, kw) or a channel-major product (out, n, ...) as
    (groups, out/groups, -1)."""
    return array.reshape(groups, array.shape[0] // groups, -1)


def _fold_columns(d_columns) -> None:
    """Add the column gradients of offsets (i, j > 0) into those of (i, 0), in place, for the
    wide layout of `Windows`.

    There, the element of offset (i, j) lands j places after that of (i, 0) in the flattened
    chunk, so each addition is one long shifted run instead of a scatter of short rows, which
    leaves a third of the scattering to do. A run shifted past its sample's end carries only
    the wrap-around grid columns, whose gradients are exactly zero, so it may spill into the
    next sample or be cut off.
    """
    runs = d_columns.reshape(d_columns.shape[:3] + (-1,))
    for j in range(1, runs.shape[2]):
        runs[:, :, 0, j:] += runs[:, :, j, :-j]


@dataclass(frozen=True)
class Conv2D(Operator):
    """y = act(conv(x, kernel) + bias) on NCHW input, kernel (out, in/groups, kh, kw).

    Splittable dims: N (sample), H and W (attribute, with a halo), and C (parameter) when every
    output channel partition covers whole groups for any split, i.e. groups == 1 or one output
    channel per group (depthwise); other grouped convolutions would need partial groups and leave
    C unsplit. Forward saves only the padded input; backward rebuilds the column matrix chunk
    by chunk (see `_columns`), which costs one more gather but never holds kh*kw copies of the
    input.
    """

    out_channels: int
    kernel: Pair
    stride: Pair = (1, 1)
    padding: Padding = ((0, 0), (0, 0))
    activation: str = "none"
    groups: int = 1
    use_bias: bool = True

    type_name = "Conv2D"

    def infer(self, inputs):
        check_window_op(self, inputs, "conv2d")
        x = inputs[0]
        if self.out_channels <= 0 or self.groups <= 0:
            raise ShapeError(f"conv2d out_channels and groups must be positive, got "
                             f"{self.out_channels} and {self.groups}")
        if x.shape[1] % self.groups or self.out_channels % self.groups:
            raise ShapeError(f"conv2d groups={self.groups} must divide the input channels and "
                             f"out_channels={self.out_channels}; input shape {x.shape}")
        ho, wo = window_output_hw(x, self.kernel, self.stride, self.padding, "conv2d")
        return (TensorSpec((x.shape[0], self.out_channels, ho, wo), x.dtype),)

    def weight_specs(self, inputs):
        per_group = inputs[0].shape[1] // self.groups
        area = self.kernel[0] * self.kernel[1]
        shape = (self.out_channels, per_group) + tuple(self.kernel)
        kernel = WeightSpec(name="kernel", shape=shape, initializer="glorot_uniform",
                            fan_in=per_group * area, fan_out=self.out_channels * area // self.groups)
        if not self.use_bias:
            return (kernel,)
        return kernel, WeightSpec(name="bias", shape=(self.out_channels,))

    def forward(self, xp, xs, ws, part):
        (x,), kernel = xs, ws[0]
        windows = Windows.of(part, self.kernel, self.stride, self.padding)
        aten = vendor.aten(xp)
        if aten is not None:
            return self._aten_forward(aten, windows, x, ws)
        padded = windows.pad(xp, x, 0.0)
        groups, out = x.shape[1] // kernel.shape[1], kernel.shape[0]
        # the product comes out channel-major: (out, n) + grid
        y = xp.empty((out, x.shape[0]) + windows.grid_hw, dtype=x.dtype)
        for start, stop, columns in self._columns(xp, windows, padded, groups):
            xp.matmul(_grouped(kernel, groups), columns, out=_grouped(y[:, start:stop], groups))
        y = windows.crop(y.transpose(1, 0, 2, 3))
        result = xp.empty(y.shape, dtype=x.dtype)
        if self.use_bias:
            xp.add(y, ws[1].reshape(1, out, 1, 1), out=result)
        else:
            result[...] = y
        result, act_saved = activate(xp, self.activation, result)
        return [result], (padded, kernel, act_saved, windows)

    def kept_for_backward(self, inputs):
        return replace(activation_kept(self.activation), inputs=(0,))

    def backward(self, xp, dys, saved, part):
        if isinstance(saved, vendor.Saved):
            return self._aten_backward(saved.aten, dys[0], *saved.values, part)
        padded, kernel, act_saved, windows = saved
        dy = activate_backward(xp, self.activation, dys[0], act_saved)
        groups = windows.in_shape[1] // kernel.shape[1]
        # the output gradient in the layout of the forward product: (out, n) + grid
        dy_t = windows.uncrop(xp, dy.transpose(1, 0, 2, 3))
        wants_dx = part.wants_grad(0)
        d_padded = windows.empty(xp, dy.dtype) if wants_dx else None
        d_kernel = None
        for start, stop, columns in self._columns(xp, windows, padded, groups):
            dy_part = _grouped(dy_t[:, start:stop], groups)
            # (in, out) is the faster BLAS layout for this product; transposed once at the end
            product = xp.matmul(columns, dy_part.transpose(0, 2, 1))
            d_kernel = product if d_kernel is None else d_kernel + product
            if not wants_dx:
                continue
            # the columns are used up: their buffer takes their gradient
            xp.matmul(_grouped(kernel, groups).transpose(0, 2, 1), dy_part, out=columns)
            d_columns = columns.reshape(self._column_shape(windows, stop - start))
            if windows.wide:
                _fold_columns(d_columns)  # then only the offsets (i, 0) remain to scatter
            for i, j, tap in windows.taps(d_padded, start, stop):
                if j == 0 or not windows.wide:
                    windows.scatter(tap, d_columns[:, i, j].transpose(1, 0, 2, 3))
        grads = [xp.ascontiguousarray(d_kernel.transpose(0, 2, 1)).reshape(kernel.shape)]
        if self.use_bias:
            grads.append(dy_t.reshape(kernel.shape[0], -1).sum(axis=1))
        return [windows.unpad(xp, d_padded) if wants_dx else None], grads

    def _aten_forward(self, aten, windows: Windows, x, ws):
        tensor, padding, explicit = windows.aten_input(aten, x, 0.0)
        kernel = aten.tensor(ws[0])
        bias = aten.tensor(ws[1]) if self.use_bias else None
        y = aten.ops.convolution(tensor, kernel, bias, self.stride, padding, (1, 1), False,
                                 (0, 0), x.shape[1] // kernel.shape[1])
        y, act_saved = aten_activate(aten, self.activation, y, overwrite=True)
        return [aten.array(y)], vendor.Saved(aten, (tensor, kernel, padding, explicit,
                                                    act_saved, windows))

    def _aten_backward(self, aten, dy, tensor, kernel, padding, explicit, act_saved, windows,
                       part):
        dy = aten_activate_backward(aten, self.activation, aten.tensor(dy), act_saved)
        wants_dx = part.wants_grad(0)
        bias_sizes = [kernel.shape[0]] if self.use_bias else None
        dx, d_kernel, d_bias = aten.ops.convolution_backward(
            dy, tensor, kernel, bias_sizes, self.stride, padding, (1, 1), False, (0, 0),
            tensor.shape[1] // kernel.shape[1], [wants_dx, True, self.use_bias])
        grads = [aten.array(d_kernel)] + ([aten.array(d_bias)] if self.use_bias else [])
        dx = aten.array(windows.aten_input_grad(dx, explicit)) if wants_dx else None
        return [dx], grads

    def _column_shape(self, windows: Windows, samples: int) -> tuple[int, ...]:
        return (windows.in_shape[1],) + tuple(self.kernel) + (samples,) + windows.grid_hw

    def _columns(self, xp, windows: Windows, padded,
                 groups: int) -> Iterator[tuple[int, int, Any]]:
        """(start, stop, columns) per chunk of samples [start, stop): the im2col matrix
        columns[g, (c, i, j), (n, oh, ow)] = padded[n, g * in/groups + c, oh * sh + i, ow * sw + j]
        shaped (groups, -1, samples * grid size), all chunks written into one reused buffer.

        Chunking bounds the workspace (no column matrix of the whole batch is ever held, and
        backward rebuilds the columns instead of keeping them), and a buffer of a few MiB that is
        written and then read at once stays in cache and costs no fresh pages. Samples sit inside
        the columns so that one matrix product serves a whole chunk.
        """
        n = windows.in_shape[0]
        per_sample = 1
        for size in self._column_shape(windows, 1):
            per_sample *= size
        chunk = max(1, min(n, COLUMN_BYTES // (per_sample * padded.itemsize)))
        buffer = xp.empty(chunk * per_sample, dtype=padded.dtype)
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            columns = buffer[:(stop - start) * per_sample].reshape(
                self._column_shape(windows, stop - start))
            for i, j, tap in windows.taps(padded, start, stop):
                columns[:, i, j] = tap.transpose(1, 0, 2, 3)
            yield start, stop, columns.reshape(groups, -1, columns[0, 0, 0].size)

    def _group_sizes(self, inputs) -> Pair:
        """(input channels, output channels) per group."""
        return inputs[0].shape[1] // self.groups, self.out_channels // self.groups

    def dim_kinds(self, inputs):
        whole_groups = self.groups == 1 or self.out_channels == self.groups
        return (DimKind.SAMPLE, DimKind.PARAMETER if whole_groups else None,
                DimKind.ATTRIBUTE, DimKind.ATTRIBUTE)

    def input_box(self, out_box, inputs, index):
        in_per_group, out_per_group = self._group_sizes(inputs)
        start, stop = out_box.bounds[1]
        first, last = start // out_per_group, -(-stop // out_per_group)
        box = window_input_box(out_box, self.kernel, self.stride, self.padding)
        return box.replace(1, first * in_per_group, last * in_per_group)

    def weight_box(self, out_box, inputs, index):
        channels = out_box.bounds[1]
        if index == 1:
            return Box((channels,))
        full = Box.full(self.weight_specs(inputs)[0].shape)
        return full.replace(0, *channels)

    def flops(self, inputs):
        (y,) = self.infer(inputs)
        in_per_group, _ = self._group_sizes(inputs)
        return 2 * y.size * in_per_group * self.kernel[0] * self.kernel[1]
