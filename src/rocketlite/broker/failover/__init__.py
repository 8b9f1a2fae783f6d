"""Controller mode (RocketMQ 5.x RIP-44, `enableControllerMode=true`): the controller decides who
is master; this package makes a broker follow.

* `node.FailoverBroker`: the process's supervisor. It registers with the controller, heartbeats
  every `brokerHeartbeatInterval` ms and reads the group's replica info; when the controller
  names it master at a new epoch it (re)starts its `BrokerController` as brokerId 0 (so the name
  server's route follows), appending the epoch to its epoch file; when another broker is master
  it truncates its log to the end of the last epoch it shares with that master and restarts as
  its slave. A master that cannot reach the controller for `controllerHeartBeatTimeoutMills` ms
  stops serving (it may have been replaced).
* `sync_state.SyncStateKeeper`: a master's SyncStateSet — what SYNC sends wait for with
  `allAckInSyncStateSet`, shrunk (through the controller first) when a member has not caught up
  for `haMaxTimeSlaveNotCatchup` ms, expanded when a replica catches up.
* `epochs`: the epoch file (`protocol/formats/epoch_file`) on disk.
"""
