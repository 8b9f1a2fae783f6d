"""ACL 2.0 (RocketMQ 5.3, RIP-68): users, ACL policies, authentication and authorization.

`model` holds the vocabulary (users, resources, actions, policies) and how a policy decides a
request; `store` keeps users and ACLs in one JSON file of the broker's config directory;
`manager` is the create/update/delete/get/list logic with RocketMQ's checks and messages;
`contexts` maps each request (remoting code or gRPC RPC) to the resources and actions it needs,
as Java's `DefaultAuthorizationContextBuilder`; `checks` authenticates (the HMAC signature on
both ports) and authorizes; `guard` puts both in front of every remoting handler (the gRPC
endpoint's `grpc/auth.py` calls `checks` itself); `processor` serves AUTH_* 3001-3010;
`migrate` imports a `plain_acl.yml` (ACL 1.0) on start. The broker keys are in `BrokerConfig`.
"""
