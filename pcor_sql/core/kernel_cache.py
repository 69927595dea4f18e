"""numba's cached kernels, kept in step with the sources they were compiled from.

numba checks a cached kernel against its own file only, yet a kernel holds the machine code of
the helpers it calls from other files: after a change to a helper's file alone (a `git pull`,
a branch switched in a checkout), the caller's cached code would go on running the old helper
— a silent wrong verdict. So the kernels cached beside the sources carry one stamp over every
kernel module's source; when it differs, they are all dropped and compiled again (once). A
package directory that is not writable is an install, which rewrites every file, so numba's
own check suffices there.
"""

from __future__ import annotations

import hashlib
import os

#: The modules that hold compiled kernels (a test keeps this list whole).
KERNEL_MODULES = ("jit.py", "cell_moves.py", "run_kernels.py", "verifiers/histogram_kernel.py",
                  "verifiers/histogram_node.py", "verifiers/histogram_walk.py",
                  "verifiers/lof_kernel.py", "verifiers/lof_kernel_walk.py", "verifiers/lof_walk.py",
                  "verifiers/lof_window_walk.py", "verifiers/moment_kernel.py", "verifiers/moment_node.py",
                  "verifiers/moment_state.py", "verifiers/moment_walk.py", "verifiers/node_counts.py",
                  "verifiers/value_order.py", "verifiers/walk_batches.py", "verifiers/window_counts.py",
                  "verifiers/zscore_grid.py")
_STAMP = "pcor-sql-kernels.stamp"


def drop_stale_kernels(here: str) -> bool:
    """Drops the kernels cached under `here` (pcor_sql/core) and its verifiers/ unless their
    stamp matches the kernel modules' sources now; returns whether it dropped them."""
    digest = hashlib.sha256()
    try:
        for name in KERNEL_MODULES:
            with open(os.path.join(here, name), "rb") as f:
                digest.update(f.read())
    except OSError:
        return False
    folders = [os.path.join(here, "__pycache__"), os.path.join(here, "verifiers", "__pycache__")]
    stamp = os.path.join(folders[0], _STAMP)
    try:
        with open(stamp, encoding="ascii") as f:
            if f.read().strip() == digest.hexdigest():
                return False
    except OSError:
        pass
    try:
        for folder in folders:
            for name in os.listdir(folder) if os.path.isdir(folder) else ():
                if name.endswith((".nbi", ".nbc")):
                    os.unlink(os.path.join(folder, name))
        os.makedirs(folders[0], exist_ok=True)
        with open(stamp, "w", encoding="ascii") as f:
            f.write(digest.hexdigest() + "\n")
    except OSError:  # read-only (an install): numba's per-file check stands
        return False
    return True
