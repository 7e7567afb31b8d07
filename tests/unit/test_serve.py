"""`serve`'s own concern beside the assembly: the connections that fit the open-file limit."""

from __future__ import annotations

import resource

import pytest
from siglip_text.serve import RESERVED_DESCRIPTORS, descriptors_for


def test_the_connections_that_fit_the_open_file_limit_are_allowed() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert descriptors_for(8) == 8
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    # more connections than the hard limit allows: the soft limit rises to it, no further
    assert descriptors_for(hard) == hard - RESERVED_DESCRIPTORS
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
