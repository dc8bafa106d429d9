"""A resumed study's wall time adds up over its drivers (study/tracking/start.py)."""

import time

from study.names import DRIVERS_TAG, WALL_TAG
from study.tracking.start import DriverTime


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
