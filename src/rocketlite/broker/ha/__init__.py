"""Master/slave replication (RocketMQ 4.x HA): `master` serves slaves on `haListenPort` and answers
SYNC_MASTER waits, `slave` copies the master's commit log, `sync` copies its config files. The
frame layout is `rocketlite.protocol.ha_frames`."""
