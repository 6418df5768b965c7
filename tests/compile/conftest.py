"""The fresh-user rounds (4 to 21) overlap each other and the later ones: by default
half of each of their files runs (a fixed half, chosen by the hash of each case's name; every
strict xfail, which says when a gap closes, runs always), to keep the suite within CI's time.
TT_COMPILE_ALL_ROUNDS=1 runs every case."""
import os
import re
import zlib

_SAMPLED = re.compile(r"test_compile_round(4|5|6|7|8|9|10_r10a|10_r10b|10_r11|13a|13b|14|15|15b|16a|16b"
                      r"|17a|17b|18a|18b|19a|19b|20a|20b|20c|21a|21b)\.py$")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TT_COMPILE_ALL_ROUNDS") == "1":
        return
    kept, dropped = [], []
    for item in items:
        sampled = _SAMPLED.search(str(item.path)) and item.get_closest_marker("xfail") is None
        (dropped if sampled and zlib.crc32(item.nodeid.encode()) % 2 else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
