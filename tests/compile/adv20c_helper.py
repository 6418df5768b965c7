"""Helper module for test_compile_round20c: module globals read by compiled functions."""
import os

import numpy as np

import tinytensor as tt

SCALE = 2.0
CFG = {"k": 1.0, "mode": "a"}
TABLE = [1.0, 2.0, 3.0]
FLAG = True
NAME = "SCALE"


def scaled(x):
    return x * SCALE


def by_mode(x):
    if CFG["mode"] == "a":
        return x * CFG["k"]
    return -x


def table_pick(x, i):
    return x * TABLE[i]


def env_scale(x):
    return x * float(os.environ.get("TT_R20C_SCALE", "1.0"))


def uses_max(x):
    return x * max(1.0, 2.0)


def uses_getattr(x):
    import sys
    return x * getattr(sys.modules[__name__], NAME)


def np_const(x):
    return x + np.float64(SCALE)


def flag_branch(x):
    return tt.tanh(x) if FLAG else tt.sin(x)
