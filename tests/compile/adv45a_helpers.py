"""Helper module for round 45a: globals read by helper functions, swapped between calls."""

import numpy as np

import tinytensor as tt

SCALE = 1.5
MODE = "tanh"
COEFS = [1.0, -0.5, 0.25]
CONFIG = {"clip": 2.0, "shift": 0.1}
OFFSET = np.float64(0.25)


def scaled(x):
    return x * SCALE


def activate(x):
    if MODE == "tanh":
        return tt.tanh(x)
    return tt.sin(x)


def poly(x):
    out = x * 0.0
    for c in COEFS:
        out = out * x + c
    return out


def clipped(x):
    return tt.clip(x + CONFIG["shift"], -CONFIG["clip"], CONFIG["clip"])


def offset(x):
    return x + OFFSET


def act2(x):
    return tt.tanh(x)
