"""The controller of controller mode (RocketMQ 5.x RIP-44), with its state in etcd.

* `etcd`: a small client for etcd's v3 JSON gateway (range, put, txn, leases).
* `state`: a broker group's replica state (master, epoch, SyncStateSet) and the election rule,
  pure functions over it.
* `config`: `ControllerConfig` (`rocketlite controller -c FILE`, or `enableControllerInNamesrv`).
* `service`: `ControllerService`, the remoting server brokers and admin tools talk to.

etcd decides: every change is a compare-and-swap transaction on the group's state key, so any
number of controllers can serve the same groups at once. Broker liveness is an etcd lease per
broker, kept alive by the broker's heartbeats through whichever controller receives them.
"""
