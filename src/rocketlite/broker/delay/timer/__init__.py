"""5.x timer messages: a delivery time of any millisecond up to `timerMaxDelaySec` ahead.

`park.py` is the send side (which sends are timers, how one is parked in `rmq_sys_wheel_timer`),
`service.py` the delivery (a heap of pending timers and a loop timer at the next one),
`progress.py` the file that makes it survive a restart (`config/timerProgress.json`).
"""

from rocketlite.broker.delay.timer.park import (
    TIMER_NEEDLE,
    TIMER_QUEUE_ID,
    TIMER_TOPIC,
    asks_for_timer,
    park_timer_message,
)
from rocketlite.broker.delay.timer.service import TimerMessageService

__all__ = [
    "TIMER_NEEDLE",
    "TIMER_QUEUE_ID",
    "TIMER_TOPIC",
    "TimerMessageService",
    "asks_for_timer",
    "park_timer_message",
]
