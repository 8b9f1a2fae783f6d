"""`rocketlite admin`: mqadmin's verbs over the remoting protocol."""
