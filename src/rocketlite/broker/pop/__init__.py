"""POP consumption (RocketMQ 5.x): the rules, their log on disk, and the remoting processor.

`state.py` holds the rules (a pop cursor per group/topic/queue, the messages in flight with their
deadlines, ack and change-invisible-time by receipt handle, redelivery), `log.py` the bytes, the
fdatasync and the recovery of `config/popState.log` (+ `popState.snap`), `processor.py`
POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME on the remoting port. The headers and
the receipt handle are `protocol/wire/pop.py`; the gRPC port's receive, ack and invisible-time
RPCs (`broker/grpc/consume.py`) call the same processor.
"""
