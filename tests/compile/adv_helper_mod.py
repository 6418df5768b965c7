"""A helper module for test_compile_adversarial.py: globals read by functions defined here."""

import functools

import numpy as np

SCALE = 2.0
CONFIG = {"shift": 1.0, "act": "tanh"}
ARR = np.array([1.0, 2.0, 3.0])
COUNT = 0


def scaled(x):
    return x * SCALE


def shifted(x):
    return x + CONFIG["shift"]


def bump():
    global COUNT
    COUNT += 1
    return COUNT


@functools.lru_cache(maxsize=128)
def cached_coef(n):
    return SCALE * n
