"""The docs' code blocks as tests: finding them in the Markdown (`markdown`) and running each by
its info string (`blocks`)."""
