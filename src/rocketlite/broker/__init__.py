"""The broker: glues the store to the remoting protocol (asyncio), one processor module per concern."""
