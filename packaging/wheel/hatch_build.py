"""Build hook: the wheel holds native code, so it is tagged for the platform
(``py3-none-linux_x86_64``; ``auditwheel repair`` then gives it its manylinux tag)."""

import platform

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class PlatformTag(BuildHookInterface):
    """Marks the wheel as platform-specific, for any Python 3."""

    def initialize(self, version, build_data):
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-linux_{platform.machine()}"
