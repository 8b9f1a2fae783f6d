"""The store's read-side algorithms over the commit log's bytes, with their compiled twin.

`scan_ref` (RocketMQ's record check, record by record: dispatch and recovery), `dispatch_ref`
(recovery's segment walk, a pull's choice of consume-queue units, units to bytes, a dispatched
batch's consume-queue runs and index entries, all of dispatch in one call) are the references;
`_native/_dispatch.pyx` is their compiled twin; `speedups` picks between them. The formats they
read are `protocol/formats/` (record, consume-queue unit); they live here, next to the store,
because only the store runs them.
"""
