"""ACL 1.0 matrix: which credentials may do what on which topic, checked end to end with real clients.

One broker (module-scoped, `aclEnable=true`) with this `plain_acl.yml`:

* `aclNormalUser`: not admin, `defaultTopicPerm: DENY`, `defaultGroupPerm: DENY`, topics
  T_DENY=DENY, T_PUB=PUB, T_SUB=SUB, T_PUBSUB=PUB|SUB (T_OTHER is not listed: the default applies),
  groups G_SUB=SUB, G_DENY=DENY (and one SUB group per real-client consumer run);
* `aclAdminUser`: `admin: true`, no topic or group perms (so everything is allowed);
* `aclWhiteUser`: `whiteRemoteAddress: 127.0.0.1`, so its requests from 127.0.0.1 skip the
  signature and permission checks (its secret is never needed);
* `globalWhiteRemoteAddresses: [127.0.0.2]`: requests from 127.0.0.2 need no keys at all.

Credentials (rows of the matrix): the normal account with the right keys, with a wrong secret,
an unknown access key, no keys, the admin account, the white-listed account (wrong secret, from
127.0.0.1), and no keys from the globally white-listed 127.0.0.2.

`test_sdk_resource_matrix` drives rocketlite.client (AsyncProducer.send, AsyncPullConsumer.fetch)
for every credentials row × {send, pull as G_SUB, pull as G_DENY} × the five topics, and
`test_sdk_admin_matrix` sends the admin-only UPDATE_AND_CREATE_TOPIC (17) and
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) through the SDK's client instance. Each row's clients
get its keys the SDK's way (`access_key=` / `secret_key=` on the producer and consumer, or in
`ClientConfig`), and the SDK signs every request as Java's `AclClientRPCHook` does; they run as
client instance `acl-<row>`. Only the 127.0.0.2 row needs a test-side hook (`bind_global_white`):
its instance's sockets are bound to that address. An allowed send is read back with the admin
keys (same body at the offset the send returned); an allowed pull returns the body the admin
seeded; a refused one raises NoPermissionError with code 16 and the broker's remark, matched
whole (see `reason()`).

`test_real_producer` / `test_real_consumer` run the unmodified ali-ons and C++ (rocketmq==0.4.4)
clients with the right and a wrong secret on a subset (producers: T_PUB, T_SUB, T_DENY; consumers:
T_SUB, T_PUB, T_DENY). The clients do not print the broker's remark for a refused send (ali-ons
says "Send [4] times, still failed", the C++ client "No route info of this topic"), so the
broker's verdicts are recorded (the validator is wrapped, nothing else changes) and the test
waits for the refusal of that client's request, with its remark. A consumer is refused at its
HEART_BEAT (the subscription needs SUB on the topic, and the signature must check); not
registered, neither client ever pulls (ali-ons gives up with "no consumer for this group", the
C++ client idles), and nothing is received.

The expected outcomes are the literal tables RESOURCE_MATRIX and ADMIN_MATRIX below.
"""
