"""Helpers of the GPU tests: random data by seed, element types."""


def rand(torch, shape, dtype, seed):
    """Random data of any dtype, generated on the CPU (identical on every PE,
    so a PE can rebuild what a peer holds from the peer's seed)."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -100000), min(info.max, 100000)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def storage_dtype(torch, t):
    """The torch dtype holding symm type suffix t (unsigned types use the
    signed tensor of the same width: only the bits matter)."""
    return {"i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
            "u8": torch.uint8, "u16": torch.int16, "u32": torch.int32, "u64": torch.int64,
            "f32": torch.float32, "f64": torch.float64}[t]


def to_signed(value, bits):
    """A Python int as the signed integer of `bits` bits with the same bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value
