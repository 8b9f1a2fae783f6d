"""Delayed delivery: messages held in a system topic until their time comes, then re-put to
their real topic.

`levels.py` is 4.x's delay levels (`ScheduleMessageService`: the 18 levels of
SCHEDULE_TOPIC_XXXX, `config/delayOffset.json`), `timer/` 5.x's timer messages (any millisecond
up to `timerMaxDelaySec` ahead: parked in `rmq_sys_wheel_timer`, delivered in time order,
`config/timerProgress.json`), and `due.py` the wake-up loop both share (`DueDelivery`: a loop
timer at the next due time, woken early by new units in the system topic).
"""
