"""Master/slave replication (RocketMQ 4.x HA), built by the controller according to `brokerRole`.

* ASYNC_MASTER / SYNC_MASTER (brokerId 0): `master.HAMasterService` on `haListenPort`
  (listenPort + 1 by default; an ephemeral port when listenPort is 0), woken by the dispatcher when
  records arrive. A SYNC_MASTER's send processor is built with it as its `replica` and awaits
  `wait_replicated` after the flush (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE). The bound port is
  what the broker registers as its haServerAddr.
* SLAVE (brokerId >= 1): `slave.HASlaveService` (the replication thread) learns the master's HA
  address from `haMasterAddress` or from the name server's register answers; `sync.SlaveSynchronize`
  copies the master's config files. A slave its master refuses (diverged log) sets
  brokerPermission to 0 — it answers NO_PERMISSION to pulls and registers its topics with no
  permission — rather than serve bytes that are not the master's.

The frame layout is `rocketlite.protocol.formats.ha_frames` (sans-IO).
"""
