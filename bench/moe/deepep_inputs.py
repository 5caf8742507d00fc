"""The inputs of DeepEP's intranode test, which the deep_ep benchmarks share:
tokens, their fp8 form, a top-k routing and its weights, on one rank; and
the group the CPU stand-ins hand deep_ep.Buffer."""


def fp8_rows(torch, x):
    """x (bf16 [m, hidden]) as e4m3 with one float32 scale per 128 elements (DeepEP's test cast)."""
    m, h = x.shape
    blocks = x.float().view(m, h // 128, 128)
    scale = blocks.abs().amax(dim=2).clamp(min=1e-4) / 448.0
    return (blocks / scale.unsqueeze(2)).to(torch.float8_e4m3fn).view(m, h), scale


def deepep_inputs(T, H, K, E, dev, seed):
    """(x bf16 [T, H], x8 e4m3 [T, H], s8 float32 [T, H / 128], topk_idx int64
    [T, K] (distinct experts of E, by random scores), topk_weights float32
    [T, K]) on dev, drawn after torch.manual_seed(seed) in DeepEP's order."""
    import torch
    torch.manual_seed(seed)
    x = torch.randn((T, H), dtype=torch.bfloat16, device=dev)
    x8, s8 = fp8_rows(torch, x)
    scores = torch.randn((T, E), dtype=torch.float32, device=dev).abs() + 1
    idx = torch.topk(scores, K, dim=-1, sorted=False)[1]
    w = torch.rand((T, K), dtype=torch.float32, device=dev)
    return x, x8, s8, idx, w


class RankZeroGroup:
    """A process group of n ranks as rank 0 sees it (the CPU stand-ins' Buffer group)."""

    def __init__(self, n):
        self._n = n

    def rank(self):
        return 0

    def size(self):
        return self._n
