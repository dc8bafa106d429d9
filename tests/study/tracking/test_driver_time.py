"""A resumed study's wall time adds up over its drivers, and the code each of them ran is
listed (study/tracking/start.py)."""

import json
import time

from study.names import CODE_TAG, CODE_VERSIONS_TAG, DRIVERS_TAG, WALL_TAG
from study.tracking.start import DriverTime, driver_code_versions


def test_a_first_driver_counts_its_own_time():
    driver = DriverTime({})
    time.sleep(1.1)
    tags = driver.tags()
    assert tags[DRIVERS_TAG] == "1" and 1 <= float(tags[WALL_TAG]) <= 3


def test_a_resumed_driver_adds_its_time_to_what_was_recorded():
    driver = DriverTime({WALL_TAG: "600", DRIVERS_TAG: "2", "state": "interrupted"})
    time.sleep(1.1)
    tags = driver.tags()
    assert tags[DRIVERS_TAG] == "3" and 601 <= float(tags[WALL_TAG]) <= 603


def test_each_drivers_code_is_listed_once_in_order():
    assert driver_code_versions({CODE_TAG: "abc"}, "abc") == ["abc"]  # a new study run
    assert driver_code_versions({CODE_TAG: "abc"}, "def") == ["abc", "def"]  # recorded before
    again = {CODE_TAG: "abc", CODE_VERSIONS_TAG: json.dumps(["abc", "def"])}
    assert driver_code_versions(again, "def") == ["abc", "def"]
    assert driver_code_versions(again, "abc") == ["abc", "def", "abc"]


def test_a_hand_edited_list_is_started_again_from_the_first_drivers_code():
    for odd in ("not json", "[]", '"abc"', "[1, 2]"):
        assert driver_code_versions({CODE_TAG: "abc", CODE_VERSIONS_TAG: odd}, "def") == [
            "abc",
            "def",
        ], odd
