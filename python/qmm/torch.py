"""qmm on torch tensors: qmm.torch.matmul(a, w) on CUDA bf16 tensors without copies, on torch's
current stream, the weight uploaded once per device (the handle cached on the QuantizedWeight);
registered as the custom op torch.ops.qmm.matmul with a fake implementation (torch.compile, CUDA
graphs); Linear, a drop-in for nn.Linear; replace_linears for a model (e.g. HF Qwen3).

Needs torch >= 2.4 (torch.library.custom_op) and a libqmm.so built with CUDA for CUDA tensors.
libqmm.so carries its own (static) CUDA runtime: it shares torch's device contexts, streams and
memory through the driver. CPU tensors take the NumPy path (qmm.matmul).
"""
import ctypes
import weakref

import numpy as np
import torch

from . import _api, _lib
from ._api import QmmError, QuantizedWeight
from ._lib import lib

_vp = ctypes.c_void_p
_lib._declare("qmm_cuda_built", ctypes.c_int)
_lib._declare("qmm_cuda_create", ctypes.c_int, ctypes.c_int, _vp, ctypes.POINTER(_vp))
_lib._declare("qmm_cuda_set_stream", ctypes.c_int, _vp, _vp)
_lib._declare("qmm_cuda_weight_upload", ctypes.c_int, _vp, ctypes.POINTER(_lib.W4),
              ctypes.POINTER(_vp))
_lib._declare("qmm_cuda_weight_free", None, _vp)
_lib._declare("qmm_cuda_workspace_size", ctypes.c_int, _vp, ctypes.c_int64, ctypes.c_int64,
              ctypes.c_int64, _vp, ctypes.POINTER(ctypes.c_size_t))
_lib._declare("qmm_cuda_matmul", ctypes.c_int, _vp, _vp, ctypes.c_int64, _vp, _vp, _vp,
              ctypes.c_size_t, _vp, _vp)

_contexts = {}  # device index -> qmm_cuda_ctx* (one per device, for the process's lifetime)
_handles = {}   # handle -> (ctx, device index, n, k): what the custom op may be called with


def _ctx(device):
    if device not in _contexts:
        if not lib.qmm_cuda_built():
            raise RuntimeError("qmm: this libqmm.so was built without CUDA (no nvcc at build time)")
        out = _vp()
        with torch.cuda.device(device):
            _api._call("qmm_cuda_create", device, None, ctypes.byref(out))
        _contexts[device] = out.value
    return _contexts[device]


def _eager_only(reason):
    """torch.compiler.disable with a reason where this torch takes one (>= 2.8): dynamo breaks
    the graph there (and fullgraph=True says why) instead of tracing into ctypes."""
    def wrap(fn):
        try:
            return torch.compiler.disable(fn, reason=reason)
        except TypeError:
            return torch.compiler.disable(fn)
    return wrap


@_eager_only("qmm.torch.upload copies the weight to the GPU through ctypes, which torch.compile "
             "cannot trace: upload it before compiling with fullgraph=True "
             "(qmm.torch.upload(w, device), or Linear.from_linear of a CUDA linear)")
def _upload_now(w, dev):
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"qmm: the weight {w.shape} is not on cuda:{dev} yet and a CUDA graph "
                           "is being captured (an upload synchronizes the device): upload it "
                           "before the capture (qmm.torch.upload, or one call outside it)")
    ctx = _ctx(dev)
    out = _vp()
    with torch.cuda.device(dev):
        _api._call("qmm_cuda_weight_upload", ctx, ctypes.byref(w._desc()), ctypes.byref(out))
    w.__dict__.setdefault("_cuda", {})[dev] = out.value
    _handles[out.value] = (ctx, dev, w.shape[0], w.shape[1])
    weakref.finalize(w, _free, out.value)
    return out.value


def upload(w, device):
    """The device copy of w on a CUDA device (index or torch.device), made once and cached on w;
    returns the qmm_cuda_weight handle (an int). Freed with w. Once cached, this is a dict lookup
    that torch.compile traces (the handle becomes a constant of the graph)."""
    if not isinstance(w, QuantizedWeight):
        raise TypeError(f"w must be a qmm.QuantizedWeight, not {type(w).__name__}")
    if isinstance(device, int):
        dev = device
    else:
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"qmm.torch.upload: {device} is not a CUDA device")
        dev = device.index
    if dev is None:
        dev = torch.cuda.current_device()
    cache = getattr(w, "_cuda", None)
    handle = None if cache is None else cache.get(dev)
    return _upload_now(w, dev) if handle is None else handle


def _free(handle):
    _handles.pop(handle, None)
    lib.qmm_cuda_weight_free(handle)


def _check_dtype_shape(a, k):
    if a.dtype != torch.bfloat16:
        raise TypeError(f"a has dtype {a.dtype}; qmm multiplies bf16 activations (a.bfloat16())")
    if a.dim() != 2 or a.shape[1] != k or a.shape[0] < 1:
        raise ValueError(f"a must be [M >= 1, K = {k}], got {tuple(a.shape)}")


def _check_memory(a):
    if not a.is_contiguous():
        raise ValueError("a must be contiguous (a.contiguous() copies: do it knowingly)")


# The op takes the handle with N and K, so that the fake implementation needs no lookup. What
# needs real memory (the pointer's alignment, the device) is checked in the real implementation
# only: torch.compile runs the fake one, which sees dtypes and shapes, never a pointer.
@torch.library.custom_op("qmm::matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, handle: int, n: int, k: int) -> torch.Tensor:
    entry = _handles.get(handle)
    if entry is None:
        raise ValueError(f"qmm::matmul: {handle:#x} is not a live qmm weight handle "
                         "(qmm.torch.upload makes one)")
    ctx, dev, wn, wk = entry
    if (wn, wk) != (n, k):
        raise ValueError(f"qmm::matmul: the handle is of W[{wn}, {wk}], called with N = {n}, "
                         f"K = {k}")
    _check_dtype_shape(a, k)
    if a.device.type != "cuda" or a.device.index != dev:
        raise ValueError(f"a is on {a.device}; this weight was uploaded to cuda:{dev}")
    _check_memory(a)
    if a.data_ptr() % 16:
        raise ValueError("a's data must be 16-byte aligned (a view at an odd offset is not)")
    m = a.shape[0]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    with torch.cuda.device(a.device):
        ws = ctypes.c_size_t()
        _api._call("qmm_cuda_workspace_size", ctx, m, n, k, None, ctypes.byref(ws))
        # torch's caching allocator (a graph's private pool under capture): no cudaMalloc per call
        work = torch.empty(max(ws.value, 1), dtype=torch.uint8, device=a.device)
        stream = torch.cuda.current_stream(a.device).cuda_stream
        _api._call("qmm_cuda_set_stream", ctx, stream or None)
        _api._call("qmm_cuda_matmul", ctx, a.data_ptr(), m, handle, c.data_ptr(), work.data_ptr(),
                   ws.value, None, None)
    return c


@_matmul_op.register_fake
def _(a, handle, n, k):
    _check_dtype_shape(a, k)
    return a.new_empty((a.shape[0], n))


def matmul(a, w):
    """C[M, N] = A[M, K] · W[N, K]ᵀ. CUDA: a bf16 [M, K] contiguous, 16-byte aligned; c bf16,
    computed on the current stream, a read in place. CPU: through NumPy (qmm.matmul). Meta: the
    output's shape only. Under torch.compile(fullgraph=True) upload w first (qmm.torch.upload)."""
    if not isinstance(w, QuantizedWeight):
        raise TypeError(f"w must be a qmm.QuantizedWeight, not {type(w).__name__}")
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"a must be a torch.Tensor, not {type(a).__name__}")
    n, k = w.shape
    if a.device.type == "cpu":
        if a.dim() != 2:
            raise ValueError(f"a must be 2-D, got {tuple(a.shape)}")
        c = _api.matmul(np.ascontiguousarray(a.detach().float().numpy()), w)
        return torch.from_numpy(c).to(torch.bfloat16)
    _check_dtype_shape(a, k)
    _check_memory(a)
    if a.device.type == "meta":
        return torch.ops.qmm.matmul(a, 0, n, k)
    if a.device.type != "cuda":
        raise ValueError(f"a is on {a.device}; qmm runs on CUDA devices and the CPU")
    return torch.ops.qmm.matmul(a, upload(w, a.device), n, k)


class Linear(torch.nn.Module):
    """y = x · Wᵀ + b with W in 4 bits (qmm); x bf16 on CUDA (or on the CPU, through NumPy), any
    leading dimensions."""

    def __init__(self, weight, bias=None):
        super().__init__()
        if not isinstance(weight, QuantizedWeight):
            raise TypeError("weight must be a qmm.QuantizedWeight")
        self.weight_q = weight
        self.out_features, self.in_features = weight.shape
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().clone(),
                                                                 requires_grad=False)

    @classmethod
    def from_linear(cls, linear, group_size=128):
        """Quantize an nn.Linear's weight (on the CPU, as mx.quantize) into a qmm Linear placed on
        the linear's device (a CUDA one uploads the weight now). group_size=128 is the path every
        CUDA kernel takes; for a group size the CUDA kernels lack, the upload raises QmmError."""
        w = linear.weight.detach().to("cpu", torch.float32).contiguous().numpy()
        mod = cls(_api.quantize(w, group_size), linear.bias)
        if linear.weight.is_cuda:
            upload(mod.weight_q, linear.weight.device)
            mod = mod.to(linear.weight.device)
        return mod

    def forward(self, x):
        lead = x.shape[:-1]
        # as nn.Linear, any strides in; the copy happens only for a non-contiguous x
        y = matmul(x.reshape(-1, self.in_features).contiguous(), self.weight_q)
        y = y.reshape(*lead, self.out_features)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"group_size={self.weight_q.group_size}, bias={self.bias is not None}")


def replace_linears(model, group_size=128, skip=("lm_head",)):
    """Swap every nn.Linear of model (whose in_features is a multiple of group_size and whose
    name has no part in skip) for a qmm Linear, in place; returns the swapped names. All or
    nothing: every replacement is made (quantized, uploaded) before the first swap, so a refusal
    (e.g. QmmError for a group size the CUDA kernels lack) leaves the model as it was.
    group_size=128 is the one every GPU path takes."""
    todo = []
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if (type(child) is torch.nn.Linear and child.in_features % group_size == 0
                    and not any(s in full.split(".") for s in skip)):
                todo.append((parent, child_name, full, Linear.from_linear(child, group_size)))
    for parent, child_name, _, new in todo:
        setattr(parent, child_name, new)
    return [full for _, _, full, _ in todo]


__all__ = ["Linear", "QmmError", "matmul", "replace_linears", "upload"]
