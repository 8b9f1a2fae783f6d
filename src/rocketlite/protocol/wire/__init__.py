"""The 4.x remoting wire: frames, commands and their two header encodings, typed custom headers.

Sans-IO, bytes in and objects out: `frame` (the stream decoder) over `frame_codec` (a frame's
layout and limits), `command` (`RemotingCommand` and the ROCKETMQ binary header), `header_codec`
(the header codec by serialize type), `json_header_ref` and `fastjson` (JSON headers as fastjson
writes and reads them), `custom_header` and `headers` (typed extFields of every request),
`send_response` (the SUCCESS answer to a send as one frame), `pop` (the 5.x POP headers and the
receipt handle), `acl_signature` (the signature of a request under plain ACL). `speedups` picks
the compiled twins of the per-request codecs (`_native/`) or their references.
"""
