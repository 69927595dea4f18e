"""`python -m benchmarks ...` (from the repository root) runs the lab's command line."""

from benchmarks.cli import run

if __name__ == "__main__":
    run()
