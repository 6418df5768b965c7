"""A sphinx-gallery image scraper for the examples' saved pictures.

The examples save their figures to files (`runs/*.png`, as a user running them would want) and
close them, so the matplotlib scraper sees nothing; this one picks up every PNG an example wrote
under runs/ since it last looked and shows it in the gallery.
"""
import shutil
import time
from pathlib import Path

_SEEN = {}
_START = time.time_ns()   # pictures left by earlier runs are not this build's


def png_files_scraper(block, block_vars, gallery_conf):
    from sphinx_gallery.scrapers import figure_rst

    src = Path(block_vars["src_file"]).parent
    images = []
    for png in sorted((src / "runs").glob("**/*.png")):
        stamp = png.stat().st_mtime_ns
        if _SEEN.get(png) == stamp or stamp < _START:
            continue
        _SEEN[png] = stamp
        target = next(block_vars["image_path_iterator"])
        shutil.copyfile(png, target)
        images.append(target)
    return figure_rst(images, gallery_conf["src_dir"])
