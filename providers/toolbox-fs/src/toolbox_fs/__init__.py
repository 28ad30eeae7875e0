"""toolbox-fs: the ``fs`` tool, files confined to configured root directories.

Install it and toolbox discovers it; allow it with
``ToolPolicy.standard().allow(FsTool)``, acknowledge it with
``TOOLBOX_FS_ACK=allow-fs-within-roots`` and configure it with
``Tools.load(..., options={"fs": {"roots": ["/srv/data"]}})``.
"""

from __future__ import annotations

from toolbox_fs._descriptor import FS_ACKNOWLEDGEMENT, FS_DESCRIPTOR
from toolbox_fs._options import FsOptions
from toolbox_fs._tool import FsTool

__all__ = [
    "FS_ACKNOWLEDGEMENT",
    "FS_DESCRIPTOR",
    "FsOptions",
    "FsTool",
]
