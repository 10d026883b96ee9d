"""qmm.torch on the GPU (skipped without torch, CUDA or a CUDA build of libqmm.so): results
against torch on the dequantized weight, no copy of A, CUDA graph capture, torch.compile (inductor,
dynamic shapes, CUDA graphs), opcheck on real tensors, the Linear drop-in and an HF Qwen3-shaped
model with swapped linears (when transformers is there). Group sizes other than 128 are run where
the CUDA kernels take them, and otherwise must be refused with the C side's message."""
import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
import qmm  # noqa: E402
qt = pytest.importorskip("qmm.torch")
if not qmm._lib.lib.qmm_cuda_built():
    pytest.skip("libqmm.so built without CUDA", allow_module_level=True)

# (M, N, K): decode, the wgmma range, the dense path (M >= 512)
SHAPES = [(1, 1024, 2560), (8, 4096, 2560), (64, 2560, 4096), (256, 512, 1024), (2048, 1024, 2560)]


def make(n, k, seed, group=128):
    r = np.random.default_rng(seed)
    w = qmm.quantize((r.standard_normal((n, k)) * 0.02).astype(np.float32), group)
    wd = torch.from_numpy(qmm.dequantize(w)).cuda()
    return w, wd


def reference(a, wd):
    return (a.double() @ wd.double().T)


def close(c, want):
    # bf16 output, and split-K partial planes in bf16 (summed in fp32): a few bf16 roundings
    tol = 2.0 ** -6 * want.abs() + 2e-3 * want.abs().max()
    err = (c.double() - want).abs()
    assert bool((err <= tol).all()), f"max err {err.max().item()}"


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul_vs_torch(m, n, k):
    w, wd = make(n, k, m + n)
    a = torch.randn(m, k, device="cuda").bfloat16()
    c = qt.matmul(a, w)
    assert c.dtype == torch.bfloat16 and c.shape == (m, n) and c.is_cuda
    close(c, reference(a, wd))


def test_no_copy_and_current_stream():
    m, n, k = 64, 128, 4096
    w, wd = make(n, k, 1)
    a = torch.randn(m, k, device="cuda").bfloat16()
    qt.upload(w, a.device)
    ws = ctypes.c_size_t()
    ctx = qt._ctx(a.device.index)
    qmm._api._call("qmm_cuda_workspace_size", ctx, m, n, k, None, ctypes.byref(ws))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.cuda.stream(s):
        c = qt.matmul(a, w)
    s.synchronize()
    grown = torch.cuda.max_memory_allocated() - before
    # the output and the workspace, nothing of A's size (a copy would add m*k*2 = 512 KiB)
    assert grown <= m * n * 2 + ws.value + 2048, (grown, ws.value)
    close(c, reference(a, wd))


def test_cuda_graph():
    m, n, k = 8, 2048, 2560
    w, wd = make(n, k, 2)
    a = torch.zeros(m, k, device="cuda").bfloat16()
    qt.matmul(a, w)  # upload and warm up outside the capture
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            c = qt.matmul(a, w)
    for seed in (3, 4):
        torch.manual_seed(seed)
        a.copy_(torch.randn(m, k, device="cuda").bfloat16())
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        close(c, reference(a, wd))


def test_torch_compile():
    m, n, k = 16, 1024, 2560
    w, wd = make(n, k, 5)
    qt.upload(w, 0)  # fullgraph=True cannot trace the upload (ctypes): it must be done before
    torch._dynamo.reset()
    f = torch.compile(lambda x: qt.matmul(x, w) * 2, fullgraph=True)
    a = torch.randn(m, k, device="cuda").bfloat16()
    c = f(a)
    assert c.dtype == torch.bfloat16 and c.shape == (m, n)
    close(c / 2, reference(a, wd))


def test_torch_compile_linear_dynamic():
    torch.manual_seed(9)
    lin = torch.nn.Linear(1024, 384, bias=True).cuda().bfloat16()
    q = qt.Linear.from_linear(lin)
    wd = torch.from_numpy(qmm.dequantize(q.weight_q)).cuda()
    torch._dynamo.reset()
    f = torch.compile(q, fullgraph=True, dynamic=True)
    for lead in ((3,), (2, 17), (130,)):
        x = torch.randn(*lead, 1024, device="cuda").bfloat16()
        y = f(x)
        assert y.shape == (*lead, 384)
        close(y.reshape(-1, 384), reference(x.reshape(-1, 1024), wd) + lin.bias.double())


def test_torch_compile_cuda_graphs():
    m, n, k = 8, 2048, 2560
    w, wd = make(n, k, 8)
    qt.upload(w, 0)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    f = torch.compile(lambda x: qt.matmul(x, w) * 2, mode="reduce-overhead", fullgraph=True)
    a = torch.zeros(m, k, device="cuda").bfloat16()
    for seed in range(4):  # warm-up, recording, then replays of the captured graph
        torch.manual_seed(seed)
        a.copy_(torch.randn(m, k, device="cuda").bfloat16())
        c = f(a).clone()  # the next replay overwrites a graph's output
        torch.cuda.synchronize()
        close(c / 2, reference(a, wd))
    skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
    assert skips == 0, "inductor did not capture the qmm op in a CUDA graph"


def test_opcheck_real():
    m, n, k = 32, 256, 1024
    w, _ = make(n, k, 10)
    a = torch.randn(m, k, device="cuda").bfloat16()
    h = qt.upload(w, a.device)
    torch.library.opcheck(torch.ops.qmm.matmul.default, (a, h, n, k))


def test_upload_under_capture_refused():
    w, wd = make(256, 1024, 11)
    a = torch.randn(4, 1024, device="cuda").bfloat16()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with pytest.raises(RuntimeError, match="before the capture"):
            with torch.cuda.graph(g):
                qt.matmul(a, w)
    assert not getattr(w, "_cuda", {})
    close(qt.matmul(a, w), reference(a, wd))  # uploaded now, outside the capture


def cuda_linear_or_refusal(make_it, group, model=None):
    """make_it() on the GPU; a group size the CUDA kernels lack may only be refused with the C
    side's message, leaving model (if any) untouched; then the test skips, saying so."""
    try:
        return make_it()
    except qmm.QmmError as e:
        if group != 128 and e.status == "unsupported" and "groups of 128" in str(e):
            assert model is None or not any(isinstance(x, qt.Linear) for x in model.modules())
            pytest.skip(f"groups of {group} not in this build's CUDA kernels: {e}")
        raise


@pytest.mark.parametrize("group", [128, 64])
def test_linear_dropin(group):
    torch.manual_seed(group)
    lin = torch.nn.Linear(1024, 384, bias=True).cuda().bfloat16()
    q = cuda_linear_or_refusal(lambda: qt.Linear.from_linear(lin, group_size=group), group)
    assert q.weight_q.group_size == group
    wd = torch.from_numpy(qmm.dequantize(q.weight_q)).cuda()
    x = torch.randn(2, 5, 1024, device="cuda").bfloat16()
    y = q(x)
    assert y.shape == (2, 5, 384)
    want = reference(x.reshape(-1, 1024), wd) + lin.bias.double()
    close(y.reshape(-1, 384), want)
    close(q(x.transpose(0, 1)).transpose(0, 1).reshape(-1, 384), want)  # strided in, as nn.Linear


def test_linear_default_group_is_128():
    lin = torch.nn.Linear(256, 128).cuda().bfloat16()
    assert qt.Linear.from_linear(lin).weight_q.group_size == 128


def test_rejects_before_c():
    w, _ = make(128, 256, 6)
    with pytest.raises(TypeError, match="bf16"):
        qt.matmul(torch.zeros(2, 256, device="cuda"), w)
    with pytest.raises(ValueError, match="contiguous"):
        qt.matmul(torch.zeros(256, 2, device="cuda").bfloat16().T, w)
    with pytest.raises(ValueError, match="K = 256"):
        qt.matmul(torch.zeros(2, 128, device="cuda").bfloat16(), w)
    with pytest.raises(ValueError, match="aligned"):
        qt.matmul(torch.zeros(2 * 256 + 1, device="cuda").bfloat16()[1:].view(2, 256), w)


@pytest.mark.parametrize("group", [128, 64])
def test_hf_qwen3_swapped_linears(group):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Qwen3Config(vocab_size=512, hidden_size=256, intermediate_size=768,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=64, max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(cfg).cuda().bfloat16().eval()
    # the plain model with each linear's weight replaced by its dequantized 4-bit weight
    swapped = cuda_linear_or_refusal(lambda: qt.replace_linears(model, group_size=group), group,
                                      model)
    assert len(swapped) == 2 * 7
    plain = transformers.Qwen3ForCausalLM(cfg).cuda().bfloat16().eval()
    plain.load_state_dict({k: v for k, v in model.state_dict().items()}, strict=False)
    for name in swapped:
        mod = model.get_submodule(name)
        wd = torch.from_numpy(qmm.dequantize(mod.weight_q)).cuda().bfloat16()
        plain.get_submodule(name).weight.data.copy_(wd)
    ids = torch.randint(0, 512, (1, 24), device="cuda")
    with torch.no_grad():
        got = model(ids).logits.float()
        want = plain(ids).logits.float()
    assert (got - want).abs().max().item() < 0.05 * want.abs().max().item()
    assert (got.argmax(-1) == want.argmax(-1)).float().mean().item() > 0.9
