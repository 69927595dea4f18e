import pathlib
import sys

# Run against the checkout even when the package is not installed.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
