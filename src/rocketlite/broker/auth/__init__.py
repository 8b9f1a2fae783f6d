"""ACL 2.0 (RocketMQ 5.3, RIP-68): users, ACL policies, authentication and authorization.

`model` holds the vocabulary (users, resources, actions, policies) and how a policy matches a
request; `store` keeps users and ACLs in one JSON file of the broker's config directory;
`manager` is the create/update/delete/get/list logic with RocketMQ's checks and messages;
`config` the broker keys (`authenticationEnabled`, ...); `authenticator` checks the HMAC
signature on both ports; `contexts` maps each request (remoting code or gRPC RPC) to the
resources and actions it needs, as Java's `DefaultAuthorizationContextBuilder`; `authorizer`
decides; `processor` serves AUTH_* 3001-3010; `guard` puts both checks in front of every
remoting handler; `migrate` imports a `plain_acl.yml` (ACL 1.0) on start.
"""
