"""qmm.torch without a GPU (skipped without torch): what torch.compile sees. Fake CUDA tensors
(FakeTensorMode needs no device) go through the wrapper, dynamo (torch.export strict = fullgraph)
and the fake implementation of qmm::matmul; meta tensors through torch.compile(backend="eager");
the real implementation's checks that run before any C call; the CPU path of Linear against the
C reference; replace_linears all or nothing. Runs on the H200 too (any build of libqmm.so)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import qmm  # noqa: E402
qt = pytest.importorskip("qmm.torch")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

FAKE_HANDLE = 0x5151  # never dereferenced: only fake tensors reach the op with it

# (M, N, K, group)
SHAPES = [(1, 256, 512, 128), (7, 384, 1024, 64), (33, 128, 256, 32)]


def make(n, k, group, seed):
    r = np.random.default_rng(seed)
    return qmm.quantize((r.standard_normal((n, k)) * 0.02).astype(np.float32), group)


@pytest.fixture
def cached():
    """A weight that looks uploaded to cuda:0 (the handle in its cache), removed afterwards
    without freeing (there is nothing to free)."""
    made = []

    def fake_upload(w):
        w._cuda = {0: FAKE_HANDLE}
        qt._handles[FAKE_HANDLE] = (None, 0, w.shape[0], w.shape[1])
        made.append(w)
        return w
    yield fake_upload
    for w in made:
        del w._cuda
    qt._handles.pop(FAKE_HANDLE, None)


class Mul2(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        return qt.matmul(x, self.w) * 2


def op_calls(gm):
    return [nd for nd in gm.graph.nodes if nd.target is torch.ops.qmm.matmul.default]


@pytest.mark.filterwarnings("error")  # e.g. "Accessing the data pointer of FakeTensor"
@pytest.mark.parametrize("m,n,k,group", SHAPES)
def test_fake_cuda_through_wrapper(cached, m, n, k, group):
    w = cached(make(n, k, group, m))
    with FakeTensorMode():
        a = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        c = qt.matmul(a, w)  # a FakeTensor's data_ptr() raises: the wrapper must not read it
        assert c.shape == (m, n) and c.dtype == torch.bfloat16 and c.device == a.device


@pytest.mark.parametrize("m,n,k,group", SHAPES)
def test_dynamo_fullgraph_fake_cuda(cached, m, n, k, group):
    w = cached(make(n, k, group, m))
    with FakeTensorMode(allow_non_fake_inputs=True):
        a = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        ep = torch.export.export(Mul2(w), (a,), strict=True)
        dyn = torch.export.export(Mul2(w), (torch.empty(m + 5, k, device="cuda",
                                                        dtype=torch.bfloat16),), strict=True,
                                  dynamic_shapes=({0: torch.export.Dim("m", min=1)},))
    for prog in (ep, dyn):
        calls = op_calls(prog.graph_module)
        assert len(calls) == 1 and calls[0].args[1:] == (FAKE_HANDLE, n, k)
    out = [nd for nd in dyn.graph_module.graph.nodes if nd.op == "output"][0].args[0][0]
    assert str(out.meta["val"].shape[0]) != str(m + 5) and out.meta["val"].shape[1] == n


def test_dynamo_linear_dynamic_leading_dims(cached):
    torch.manual_seed(4)
    q = qt.Linear.from_linear(torch.nn.Linear(512, 192, bias=False))
    cached(q.weight_q)
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(3, 9, 512, device="cuda", dtype=torch.bfloat16)
        dims = ({0: torch.export.Dim("b", min=2), 1: torch.export.Dim("s", min=2)},)
        ep = torch.export.export(q, (x.transpose(0, 1),), strict=True, dynamic_shapes=dims)
    calls = op_calls(ep.graph_module)
    assert len(calls) == 1 and calls[0].args[1:] == (FAKE_HANDLE, 192, 512)
    out = [nd for nd in ep.graph_module.graph.nodes if nd.op == "output"][0].args[0][0]
    b, s, n = out.meta["val"].shape
    assert n == 192 and not isinstance(b, int) and not isinstance(s, int)


def test_fullgraph_without_upload_says_upload():
    w = make(128, 256, 128, 1)
    with FakeTensorMode(allow_non_fake_inputs=True):
        a = torch.empty(4, 256, device="cuda", dtype=torch.bfloat16)
        with pytest.raises(Exception, match="torch.compiler.disable") as e:
            torch.export.export(Mul2(w), (a,), strict=True)
    assert "upload" in str(e.value)


@pytest.mark.parametrize("m,n,k,group", SHAPES)
def test_compile_meta_eager_backend(m, n, k, group):
    w = make(n, k, group, m)
    torch._dynamo.reset()
    f = torch.compile(lambda x: qt.matmul(x, w) * 2, fullgraph=True, backend="eager")
    a = torch.empty(m, k, device="meta", dtype=torch.bfloat16)
    c = f(a)
    assert c.shape == (m, n) and c.dtype == torch.bfloat16 and c.device.type == "meta"


def test_fake_impl_checks_dtype_and_shape():
    a = torch.empty(4, 256, device="meta", dtype=torch.bfloat16)
    assert torch.ops.qmm.matmul(a, 0, 96, 256).shape == (4, 96)
    with pytest.raises(TypeError, match="bf16"):
        torch.ops.qmm.matmul(a.float(), 0, 96, 256)
    with pytest.raises(ValueError, match="K = 128"):
        torch.ops.qmm.matmul(a, 0, 96, 128)
    with pytest.raises(ValueError, match="M >= 1"):
        torch.ops.qmm.matmul(a[:0], 0, 96, 256)
    with pytest.raises(ValueError, match="M >= 1"):
        torch.ops.qmm.matmul(a.view(4, 16, 16), 0, 96, 256)


def test_opcheck_meta():
    a = torch.empty(6, 512, device="meta", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.qmm.matmul.default, (a, 0, 64, 512))


def test_wrapper_rejects():
    w = make(128, 256, 128, 2)
    with pytest.raises(TypeError, match="torch.Tensor"):
        qt.matmul(np.zeros((2, 256), np.float32), w)
    with pytest.raises(TypeError, match="QuantizedWeight"):
        qt.matmul(torch.zeros(2, 256), object())
    with pytest.raises(ValueError, match="not a CUDA device"):
        qt.upload(w, "cpu")
    with pytest.raises(TypeError, match="QuantizedWeight"):
        qt.upload(w.packed, 0)
    meta = torch.empty(256, 2, device="meta", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="contiguous"):
        qt.matmul(meta.T, w)
    with pytest.raises(TypeError, match="bf16"):
        qt.matmul(meta.T.float().contiguous(), w)


def test_real_impl_checks_before_c(cached):
    w = cached(make(128, 256, 128, 3))
    a = torch.zeros(2, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="not a live qmm weight handle"):
        torch.ops.qmm.matmul(a, FAKE_HANDLE + 16, 128, 256)
    with pytest.raises(ValueError, match="W\\[128, 256\\]"):
        torch.ops.qmm.matmul(a, FAKE_HANDLE, 64, 256)
    with pytest.raises(ValueError, match="uploaded to cuda:0"):
        torch.ops.qmm.matmul(a, FAKE_HANDLE, 128, 256)  # a CPU tensor never reaches C


@pytest.mark.parametrize("group", [128, 64, 32])
def test_linear_cpu_vs_reference(group):
    torch.manual_seed(group)
    lin = torch.nn.Linear(512, 96, bias=True).bfloat16()
    q = qt.Linear.from_linear(lin, group_size=group)
    assert q.weight_q.group_size == group and "group_size=%d" % group in repr(q)
    x = torch.randn(3, 5, 512).bfloat16()
    y = q(x.transpose(0, 1))  # non-contiguous in, as nn.Linear takes
    a = x.transpose(0, 1).reshape(-1, 512).float().numpy()  # the bf16 values, exactly
    want = qmm.matmul(a, q.weight_q, reference=True) + lin.bias.detach().float().numpy()
    got = y.float().reshape(-1, 96).numpy()
    assert y.shape == (5, 3, 96)
    # the CPU path may round C once differently from the reference, and C + bias is rounded
    np.testing.assert_allclose(got, want, rtol=2 ** -6, atol=2 ** -8 * np.abs(want).max())


class Tiny(torch.nn.Module):
    def __init__(self, bad):
        super().__init__()
        self.up = torch.nn.Linear(256, 128)
        self.down = torch.nn.Linear(128, 256)
        self.odd = torch.nn.Linear(96, 32, bias=False)  # K = 96: groups of 32 only
        self.lm_head = torch.nn.Linear(256, 64)
        if bad:  # qmm_quantize refuses a non-finite weight: the second linear fails
            with torch.no_grad():
                self.down.weight[3, 5] = float("inf")


def test_replace_linears_all_or_nothing():
    model = Tiny(bad=False)
    assert qt.replace_linears(model) == ["up", "down"]
    assert isinstance(model.up, qt.Linear) and type(model.lm_head) is torch.nn.Linear
    assert qt.replace_linears(Tiny(bad=False), group_size=32) == ["up", "down", "odd"]
    model = Tiny(bad=True)
    with pytest.raises(qmm.QmmError):
        qt.replace_linears(model)
    assert not any(isinstance(mod, qt.Linear) for mod in model.modules())
