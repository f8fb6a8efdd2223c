"""How a file is cut into the parts of a multipart upload: a pure function of its size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.upload_plan import MAX_OBJECT_BYTES, MIB, MIN_PART_BYTES, TARGET_PARTS, UploadPlan

S3_MAX_PARTS = 10_000
S3_MIN_PART = 5 * MIB
S3_MAX_PART = 5 * 1024 * MIB
GB = 1_000_000_000


def test_a_60_gb_file_stays_well_under_the_part_limit():
    plan = UploadPlan.for_size(60 * GB)

    assert plan.parts <= TARGET_PARTS < S3_MAX_PARTS / 2
    assert plan.part_bytes == 14 * MIB  # 60 GB / 4096 = 14.3 MB, in whole MiB


def test_a_4_gb_file_goes_in_parts_of_the_minimum_size():
    plan = UploadPlan.for_size(4 * GB)

    assert (plan.part_bytes, plan.parts, plan.multipart) == (MIN_PART_BYTES, 477, True)


@pytest.mark.parametrize("size", [0, 1, MIN_PART_BYTES])
def test_a_file_of_one_part_or_less_is_one_request(size):
    plan = UploadPlan.for_size(size)

    assert (plan.parts, plan.multipart) == (1, False)


def test_one_byte_more_than_a_part_is_a_multipart_upload_of_two():
    plan = UploadPlan.for_size(MIN_PART_BYTES + 1)

    assert (plan.parts, plan.multipart) == (2, True)


@pytest.mark.parametrize("size", [-1, MAX_OBJECT_BYTES + 1])
def test_a_size_no_object_can_have_is_refused(size):
    with pytest.raises(ValueError):
        UploadPlan.for_size(size)


@given(st.integers(0, MAX_OBJECT_BYTES))
def test_every_size_an_object_can_have_fits_the_stores_limits(size):
    plan = UploadPlan.for_size(size)

    assert S3_MIN_PART <= plan.part_bytes <= S3_MAX_PART
    assert plan.part_bytes % MIB == 0
    assert plan.parts <= TARGET_PARTS
    assert (plan.parts - 1) * plan.part_bytes < max(size, 1) <= plan.parts * plan.part_bytes


@given(st.integers(0, MAX_OBJECT_BYTES - 1), st.integers(1, 10 * GB))
def test_a_larger_file_never_gets_smaller_parts(size, more):
    assert UploadPlan.for_size(size).part_bytes <= UploadPlan.for_size(min(size + more, MAX_OBJECT_BYTES)).part_bytes
