"""Tests and benchmarks. Importing the package gives the run its identity
key (tests/identity_key.py): pytest and `python -m tests.bench...` alike."""

from tests.identity_key import use_run_identity_key

use_run_identity_key()
