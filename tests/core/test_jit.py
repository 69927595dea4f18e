"""The shared steps of the compiled checks: numpy's summation and the context → cells step."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core.jit import (
    cell_index, context_words, flat_bits, listed_members, member_cells, member_cells_indexed, numpy_sum,
)


@pytest.mark.parametrize("scale", [1.0, 1e12])
def test_numpy_sum_is_numpys_pairwise_sum(scale):
    """Equality with numpy's own result (not pinned bits): every length through three levels
    of halving, and gathered (non-contiguous origin) arrays as the checks build them."""
    rng = np.random.default_rng(11)
    lengths = list(range(0, 700)) + rng.integers(700, 40_000, 40).tolist()
    for n in lengths:
        a = rng.standard_normal(n) * scale + rng.standard_normal() * 1e4
        assert numpy_sum(a, n) == a.sum(), n
        b = a.take(np.sort(rng.permutation(n)[: n // 3]))
        assert numpy_sum(b, b.size) == b.sum(), n


def test_a_naive_sum_would_differ_so_the_test_above_can_fail():
    rng = np.random.default_rng(2)
    a = rng.standard_normal(5000) * 1e12
    total = 0.0
    for x in a:
        total += x
    assert total != a.sum()


@pytest.mark.parametrize("sizes", [(5, 3), (7, 2, 3, 2), (3, 4, 2, 2, 3), (40, 30)])
def test_member_cells_is_the_context_membership(sizes):
    rng = np.random.default_rng(len(sizes))
    coords = np.stack([rng.integers(0, s, 300) for s in sizes], axis=1)
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    t = int(sum(sizes))
    flat = flat_bits(coords, offsets, always=0)
    assert flat.shape[1] % 4 == 0
    out = np.empty(len(coords), dtype=np.int64)
    for _ in range(50):
        mask = int(rng.integers(0, 2, t) @ (1 << np.arange(t, dtype=object))) | 1  # bit 0: `always`
        x, words = context_words(mask, (t + 63) // 64)
        k = member_cells(x, words, flat, out)
        bits = np.array([(mask >> int(b)) & 1 for b in range(t)], dtype=bool)
        expected = np.flatnonzero(np.all(bits[coords + offsets], axis=1))
        np.testing.assert_array_equal(out[:k], expected)


@pytest.mark.parametrize("sizes", [(5, 3), (7, 2, 3, 2), (60, 4, 3), (480, 12, 8), (40, 30)])
def test_the_indexed_membership_is_the_full_scan(sizes):
    """Contexts from one value per attribute to all of them: both paths (walking the cells of
    the sparsest attribute, scanning every cell) give the same cells, ascending, and so does
    listing a walk's member flags."""
    rng = np.random.default_rng(sum(sizes))
    cells = 3000
    coords = np.stack([rng.integers(0, s, cells) for s in sizes], axis=1)
    coords[0] = 0  # the record's cell: bit 0 is `always`
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    t = int(sum(sizes))
    flat = flat_bits(coords, offsets, always=0)
    index = cell_index(coords, offsets, t)
    out, want = np.empty(cells, dtype=np.int64), np.empty(cells, dtype=np.int64)
    sparse = 0
    for share in (0.0, 0.02, 0.1, 0.3, 0.6, 1.0):
        for _ in range(40):
            bits = rng.random(t) < share
            bits[offsets] = True  # every attribute keeps the record's value
            mask = int(bits.astype(np.int64) @ (1 << np.arange(t, dtype=object)))
            x, words = context_words(mask, (t + 63) // 64)
            k = member_cells_indexed(x, words, flat, index, out)
            j = member_cells(x, words, flat, want)
            np.testing.assert_array_equal(out[:k], want[:j])
            flags = np.zeros(cells, dtype=np.bool_)
            flags[want[:j]] = True  # what a walk keeps: the same cells listed off the flags
            np.testing.assert_array_equal(out[: listed_members(x, words, index, flags, out)], want[:j])
            sparse += k * 4 < cells
    assert sparse > 40  # the walk ran, not only the scan


def test_without_a_writable_cache_directory_functions_compile_in_memory(monkeypatch):
    """numba refuses cache=True when no cache directory is writable (RuntimeError "no locator
    available"); `compiled` then compiles without the disk cache instead of failing the import."""
    import numba

    import pcor_sql.core.jit as jit

    real = numba.njit

    def refusing(*args, **kwargs):
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'f.py'")
        return real(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", refusing)

    def double(x):
        return 2 * x

    assert jit.compiled(double)(21) == 42


def test_every_kernel_releases_the_gil():
    """Issue 29 item 5: the moment and histogram kernels, `member_cells` and `numpy_sum` are
    compiled with nogil, so threads of one process run checks side by side (LOF's always were)."""
    from pcor_sql.core import jit
    from pcor_sql.core.verifiers import histogram_kernel, lof_kernel, moment_kernel

    kernels = [jit.member_cells, jit.numpy_sum, jit.first_position,
               moment_kernel.member_span, moment_kernel.zscore_kernel, moment_kernel.grubbs_kernel,
               histogram_kernel.histogram_kernel]
    kernels += [f for f in vars(lof_kernel).values() if hasattr(f, "targetoptions")]
    for kernel in kernels:
        assert kernel.targetoptions.get("nogil") is True, kernel.__name__


def test_every_module_with_compiled_kernels_is_stamped():
    import pathlib
    import re

    from pcor_sql.core import jit, kernel_cache

    core = pathlib.Path(jit.__file__).parent
    found = sorted(str(p.relative_to(core)) for p in core.rglob("*.py")
                   if re.search(r"@compiled\b|compiled_with\(|numba\.njit\(", p.read_text(encoding="utf-8")))
    assert found == sorted(kernel_cache.KERNEL_MODULES)


def test_a_change_to_any_kernel_module_drops_every_cached_kernel(tmp_path):
    # numba checks a cached kernel against its own file only; a helper changed in another file
    # must not leave the caller's old machine code running.
    import pathlib
    import shutil

    from pcor_sql.core import jit, kernel_cache

    core = pathlib.Path(jit.__file__).parent
    for name in kernel_cache.KERNEL_MODULES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(core / name, tmp_path / name)
    caches = [tmp_path / "__pycache__", tmp_path / "verifiers" / "__pycache__"]
    assert kernel_cache.drop_stale_kernels(str(tmp_path))  # no stamp yet: whatever is cached goes
    for folder in caches:
        folder.mkdir(exist_ok=True)
        (folder / "kernel-1.py311.nbi").write_bytes(b"index")
        (folder / "kernel-1.py311.1.nbc").write_bytes(b"code")
    assert not kernel_cache.drop_stale_kernels(str(tmp_path))  # the same sources: kept
    assert all((folder / "kernel-1.py311.nbi").exists() for folder in caches)
    with open(tmp_path / "cell_moves.py", "a", encoding="utf-8") as f:
        f.write("\n# a helper changed\n")
    assert kernel_cache.drop_stale_kernels(str(tmp_path))
    assert not any(list(folder.glob("*.nb?")) for folder in caches)
