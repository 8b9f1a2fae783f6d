"""The foreign clients and servers the interop tests drive: the RocketMQ client drivers (ali-ons,
C++, Java, Go, the 5.x Python and Node clients) and RocketMQ's own name server and broker."""
