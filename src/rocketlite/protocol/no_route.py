"""Why a topic has no route: the text the SDK and the admin CLI give instead of RocketMQ's bare
`No topic route info in name server for the topic: TBW102`.

A producer that finds no route for its topic falls back to the TBW102 template; when that fails
too, Java reports TBW102, which names neither the user's topic nor the cause. The cause is almost
always one of two, and the name server's cluster table tells them apart: no broker is registered
at all (the broker is down or registers with another name server), or brokers are there but the
topic does not exist and none of them creates topics on first use (`autoCreateTopicEnable=false`).
Both callers (client/ and admin/, which may not import each other) ask the name server for the
cluster table and pass it here.
"""

from __future__ import annotations

from rocketlite.protocol.bodies.route import ClusterInfo


def no_route_reason(topic: str, clusters: ClusterInfo, namesrv: str, *, for_send: bool = True) -> str:
    """`no route for topic T: <cause>`; `namesrv` is the address that was asked, `for_send` says
    the TBW102 fallback was tried too (a reader never creates topics)."""
    prefix = f"no route for topic {topic}"
    if not clusters.broker_addr_table:
        names = ", ".join(sorted(clusters.cluster_addr_table))
        where = f" (cluster {names})" if names else ""
        return (
            f"{prefix}: no broker is registered with the name server {namesrv}{where}; "
            "start the broker, or check its namesrvAddr"
        )
    cluster = sorted(clusters.cluster_addr_table)[0] if clusters.cluster_addr_table else "CLUSTER"
    brokers = ", ".join(sorted(clusters.broker_addr_table))
    create = f"`rocketlite admin updateTopic -c {cluster} -t {topic}`"
    if not for_send:
        return (
            f"{prefix}: the name server {namesrv} knows no such topic (brokers {brokers}); "
            f"create it with {create}"
        )
    return (
        f"{prefix}: the name server {namesrv} knows no such topic and no broker ({brokers}) creates "
        f"topics on first send (autoCreateTopicEnable=false); create it with {create}"
    )
